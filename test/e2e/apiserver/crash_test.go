package apiserver_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/server"
)

// TestKill9DuringCreates runs `nodekit server` as its own process, SIGKILLs it in the middle of 1000
// creates, restarts it on the same data dir and checks every create that got a 201 is there.
func TestKill9DuringCreates(t *testing.T) {
	bin := buildNodekit(t)
	dataDir := t.TempDir()
	apiPort, etcdPort := freePort(t), freePort(t)
	start := func() *exec.Cmd { return startServer(t, bin, dataDir, apiPort, etcdPort) }
	proc := start()
	paths := server.Config{DataDir: dataDir}.Paths()
	client := waitClient(t, paths.AdminKubeconfig)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var created []string
	var killed sync.Once
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("cm-%04d", i)
		_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": name}}, metav1.CreateOptions{})
		if err == nil {
			mu.Lock()
			created = append(created, name)
			mu.Unlock()
		}
		if i == 300 {
			killed.Do(func() {
				go func() { _ = proc.Process.Signal(syscall.SIGKILL) }()
			})
		}
	}
	_, _ = proc.Process.Wait()
	if len(created) < 300 || len(created) == 1000 {
		t.Fatalf("expected the kill to interrupt the loop: %d creates succeeded", len(created))
	}
	proc = start()
	client = waitClient(t, paths.AdminKubeconfig)
	list, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	for _, name := range created {
		if !have[name] {
			t.Fatalf("configmap %s got 201 before the kill but is gone after restart", name)
		}
	}
	t.Logf("%d creates acknowledged before SIGKILL, all present after restart", len(created))

	// Operator backup and restore: snapshot the running store (over mutual TLS, with the data dir's etcd
	// CA and client pair, the command's defaults), restore it into a fresh data dir and serve it there
	// (same PKI): the objects and the service IP allocations are back.
	snap := filepath.Join(t.TempDir(), "snap.db")
	if out, err := exec.Command(bin, "--data-dir", dataDir, "etcd-snapshot", "save", "--etcd-servers", "https://127.0.0.1:"+strconv.Itoa(etcdPort), snap).CombinedOutput(); err != nil {
		t.Fatalf("etcd-snapshot save: %v\n%s", err, out)
	}
	_ = proc.Process.Signal(syscall.SIGTERM)
	_, _ = proc.Process.Wait()
	restored := t.TempDir()
	if out, err := exec.Command(bin, "--data-dir", restored, "etcd-snapshot", "restore", snap).CombinedOutput(); err != nil {
		t.Fatalf("etcd-snapshot restore: %v\n%s", err, out)
	}
	restoredPaths := server.Config{DataDir: restored}.Paths()
	if err := os.CopyFS(restoredPaths.PKIDir, os.DirFS(paths.PKIDir)); err != nil {
		t.Fatal(err)
	}
	startServer(t, bin, restored, freePort(t), freePort(t))
	client = waitClient(t, restoredPaths.AdminKubeconfig)
	after, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(after.Items) != len(list.Items) {
		t.Fatalf("after restore: %v, %d configmaps, want %d", err, len(after.Items), len(list.Items))
	}
}

func buildNodekit(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nodekit")
	build := exec.Command("go", "build", "-o", bin, "github.com/nodekit/nodekit/cmd/nodekit")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nodekit: %v\n%s", err, out)
	}
	return bin
}

// startServer starts `nodekit server` on loopback with its log in <dataDir>/server.log.
func startServer(t *testing.T, bin, dataDir string, apiPort, etcdPort int) *exec.Cmd {
	t.Helper()
	sc := server.Config{DataDir: dataDir, APIServer: apiserver.Options{BindAddress: "127.0.0.1", Port: apiPort},
		Etcd: etcd.Config{ClientAddr: "127.0.0.1:" + strconv.Itoa(etcdPort)}}
	cmd := exec.Command(bin, sc.Args()...)
	logf, err := os.Create(filepath.Join(dataDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	return cmd
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitClient waits for the kubeconfig and a ready API server.
func waitClient(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err == nil {
			cfg.QPS, cfg.Burst = 500, 1000
			c := kubernetes.NewForConfigOrDie(cfg)
			body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
			if err == nil && string(body) == "ok" {
				if _, err := c.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
					return c
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("nodekit server did not become ready")
	return nil
}
