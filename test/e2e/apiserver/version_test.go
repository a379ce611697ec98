package apiserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/version"
)

var releaseVersion = regexp.MustCompile(`^v1\.37\.\d+`)

// TestServerVersion: /version is nodekit's build as a parseable v1.37.x (what kubectl version and the
// e2e framework's server-version checks parse), through client-go's discovery and through kubectl.
func TestServerVersion(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	info, err := s.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	check := func(how string, info *apimachineryversion.Info) {
		t.Helper()
		if !releaseVersion.MatchString(info.GitVersion) || info.GitVersion != version.Version {
			t.Fatalf("%s: gitVersion %q, want %s (matching %s)", how, info.GitVersion, version.Version, releaseVersion)
		}
		v, err := utilversion.ParseSemantic(info.GitVersion)
		if err != nil {
			t.Fatalf("%s: gitVersion does not parse: %v", how, err)
		}
		if !v.AtLeast(utilversion.MustParseSemantic(version.KubernetesVersion)) {
			t.Fatalf("%s: %s sorts before %s", how, v, version.KubernetesVersion)
		}
		if info.Major != "1" || info.Minor != "37" || info.GoVersion == "" {
			t.Fatalf("%s: %#v", how, *info)
		}
	}
	check("discovery", info)
	if info.EmulationMajor != "1" || info.EmulationMinor != "37" {
		t.Fatalf("emulation version %s.%s, want 1.37", info.EmulationMajor, info.EmulationMinor)
	}

	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: /version checked through discovery only")
	}
	cmd := exec.CommandContext(ctxT(t), path, "--kubeconfig", s.KubeconfigPath, "version", "-o", "json")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	cmd.Stderr = os.Stderr // kubectl warns of client/server skew there
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	var doc struct {
		ServerVersion *apimachineryversion.Info `json:"serverVersion"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || doc.ServerVersion == nil {
		t.Fatalf("kubectl version -o json: %v\n%s", err, out)
	}
	check("kubectl", doc.ServerVersion)
}
