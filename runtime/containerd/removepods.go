package containerd

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemovePods is the runtime's teardown (`nodekit down`): it starts the managed containerd of cfg —
// when it ever ran there (its root, cfg.Root or Dir/root, exists) — lists the pod sandboxes, removes
// every pod and container through CRI (their network namespaces and CNI attachments go with them),
// and stops it (Cleanup). It returns the UIDs of the pods it found, for their log directories; none
// and no error when containerd never ran there.
func RemovePods(ctx context.Context, cfg Config) ([]string, error) {
	root := cfg.Root
	if root == "" {
		root = filepath.Join(cfg.Dir, "root")
	}
	if _, err := os.Stat(root); err != nil {
		return nil, nil
	}
	sup, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sup.log.Info("starting the managed containerd to remove pods", "dir", cfg.Dir)
	if err := sup.Start(ctx); err != nil {
		return nil, errors.Join(err, sup.Stop(ctx))
	}
	var uids []string
	if c := sup.Client(); c != nil {
		if resp, err := c.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
			for _, s := range resp.GetItems() {
				uids = append(uids, s.GetMetadata().GetUid())
			}
		}
	}
	sup.log.Info("removing pods and containers", "pods", len(uids))
	return uids, sup.Cleanup(ctx)
}
