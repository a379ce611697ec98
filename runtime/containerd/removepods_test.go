package containerd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestRemovePodsWhereContainerdNeverRan: no root, nothing to remove, and no containerd started (the
// binary given does not exist, so a start would fail).
func TestRemovePodsWhereContainerdNeverRan(t *testing.T) {
	dir := t.TempDir()
	uids, err := RemovePods(context.Background(), Config{Dir: dir, Binary: filepath.Join(dir, "no-containerd")})
	if err != nil || uids != nil {
		t.Fatalf("RemovePods = %v, %v; want nil, nil", uids, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("RemovePods made %v in a dir where containerd never ran", ents)
	}
}
