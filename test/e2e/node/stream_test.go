package node_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"

	"github.com/nodekit/nodekit/images/bundled"
)

// kubectlPath is kubectl 1.37 when the conformance cache has built it, else the kubectl on PATH ("" when
// there is none).
func kubectlPath() string {
	const cached = "/var/cache/nodekit/conformance/v1.37.2/bin/kubectl"
	if _, err := exec.LookPath(cached); err == nil {
		return cached
	}
	p, _ := exec.LookPath("kubectl")
	return p
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// awaitOutput waits until out holds want, failing t after timeout.
func awaitOutput(t *testing.T, out *syncBuffer, want string, timeout time.Duration, what string) {
	t.Helper()
	waitFor(t, timeout, what, func() (bool, string) {
		return strings.Contains(out.String(), want), fmt.Sprintf("output so far %q", out.String())
	})
}

// testPodStreams drives pods/attach, pods/portforward and pods/exec through the API server to the
// kubelet server and the CRI streaming server on a real node: client-go's SPDY and WebSocket executors
// attach to a container running cat (a line written to its stdin comes back on its stdout) and exec in
// web; client-go's SPDY and SPDY-over-WebSocket port-forward dialers and `kubectl port-forward` carry an
// HTTP GET to web's port 8080 from a loopback port; `kubectl attach -i` echoes a line through cat.
// web is a Running pod of the demo server on nodeName, with its container "web" serving on 8080.
func testPodStreams(t *testing.T, cfg *rest.Config, kubeconfig, nodeName string, web *v1.Pod) {
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	catPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: randName("cat-"), Namespace: web.Namespace}, Spec: v1.PodSpec{NodeName: nodeName,
		Containers: []v1.Container{{Name: "cat", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullNever, Command: []string{"cat"}, Stdin: true}}}}
	if _, err := admin.CoreV1().Pods(catPod.Namespace).Create(ctx, catPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		admin.CoreV1().Pods(catPod.Namespace).Delete(context.Background(), catPod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	waitFor(t, 60*time.Second, "cat pod Running", func() (bool, string) {
		p, err := admin.CoreV1().Pods(catPod.Namespace).Get(ctx, catPod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, string(p.Status.Phase)
	})
	attachURL := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace(catPod.Namespace).Name(catPod.Name).SubResource("attach").
		VersionedParams(&v1.PodAttachOptions{Container: "cat", Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	pfURL := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace(web.Namespace).Name(web.Name).SubResource("portforward").URL()

	// attach streams a line through cat: written to stdin, read back from stdout.
	attach := func(t *testing.T, ex remotecommand.Executor, line string) {
		stdin, w := io.Pipe()
		var stdout, stderr syncBuffer
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		done := make(chan error, 1)
		go func() {
			done <- ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
		}()
		// Written once the stream is up: what cat reads before an attach is not streamed to it.
		go func() {
			for sctx.Err() == nil && !strings.Contains(stdout.String(), line) {
				fmt.Fprintln(w, line)
				time.Sleep(500 * time.Millisecond)
			}
		}()
		defer func() { cancel(); w.Close(); <-done }()
		awaitOutput(t, &stdout, line, 30*time.Second, "the line echoed through attach")
		select {
		case err := <-done:
			t.Fatalf("attach ended early: %v (stderr %q)", err, stderr.String())
		default:
		}
	}
	t.Run("AttachSPDY", func(t *testing.T) {
		ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, attachURL)
		if err != nil {
			t.Fatal(err)
		}
		attach(t, ex, "through-spdy")
	})
	t.Run("AttachWebSocket", func(t *testing.T) {
		// v5.channel.k8s.io, translated to SPDY by the API server; no fallback: a failed upgrade fails.
		ex, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, attachURL.String())
		if err != nil {
			t.Fatal(err)
		}
		attach(t, ex, "through-websocket")
	})
	t.Run("ExecWebSocket", func(t *testing.T) {
		exec := func(command ...string) (string, string, error) {
			u := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace(web.Namespace).Name(web.Name).SubResource("exec").
				VersionedParams(&v1.PodExecOptions{Container: "web", Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
			ex, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			err = ex.StreamWithContext(ectx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
			return stdout.String(), stderr.String(), err
		}
		if stdout, stderr, err := exec("hostname"); stdout != web.Name+"\n" || stderr != "" || err != nil {
			t.Errorf("exec hostname over WebSocket: stdout %q stderr %q err %v; want the pod's name", stdout, stderr, err)
		}
		// stderr and the exit code come back over the v5 protocol's error channel
		if stdout, stderr, err := exec("cat", "/nonexistent"); stdout != "" || !strings.Contains(stderr, "/nonexistent") || err == nil || !strings.Contains(err.Error(), "exit code 1") {
			t.Errorf("exec cat /nonexistent over WebSocket: stdout %q stderr %q err %v; want its error on stderr and exit code 1", stdout, stderr, err)
		}
	})

	// forward opens a loopback port to web's 8080 through dialer and GETs / through it.
	forward := func(t *testing.T, dialer func() (httpstream.Dialer, error)) {
		d, err := dialer()
		if err != nil {
			t.Fatal(err)
		}
		stop, ready := make(chan struct{}), make(chan struct{})
		pf, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- pf.ForwardPorts() }()
		defer func() { close(stop); <-done }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("port-forward: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("port-forward not ready within 20 s")
		}
		ports, err := pf.GetPorts()
		if err != nil || len(ports) != 1 {
			t.Fatalf("port-forward ports: %v %v", ports, err)
		}
		if code, body := get(t, &http.Client{Timeout: 10 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local)); code != 200 || !strings.Contains(body, web.Name) {
			t.Errorf("GET through port-forward = %d %q, want 200 naming pod %s", code, body, web.Name)
		}
	}
	t.Run("PortForwardSPDY", func(t *testing.T) {
		forward(t, func() (httpstream.Dialer, error) {
			rt, upgrader, err := spdy.RoundTripperFor(cfg)
			if err != nil {
				return nil, err
			}
			return spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, pfURL), nil
		})
	})
	t.Run("PortForwardWebSocket", func(t *testing.T) {
		// SPDY/3.1+portforward.k8s.io over WebSocket, unwrapped by the API server; no fallback.
		forward(t, func() (httpstream.Dialer, error) { return portforward.NewSPDYOverWebsocketDialer(pfURL, cfg) })
	})

	t.Run("Kubectl", func(t *testing.T) {
		kubectl := kubectlPath()
		if kubectl == "" {
			t.Skip("no kubectl: neither the conformance cache's nor one on PATH")
		}
		// background starts kubectl args... and returns its output and its stdin; cleanup kills it.
		background := func(t *testing.T, args ...string) (*syncBuffer, io.Writer) {
			cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
			out := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			t.Cleanup(func() {
				cmd.Process.Kill() // our own child, by its handle
				<-done
				if t.Failed() {
					t.Logf("kubectl %v output:\n%s", args, out.String())
				}
			})
			return out, stdin
		}
		t.Run("PortForward", func(t *testing.T) {
			local := freePort(t)
			out, _ := background(t, "port-forward", "--address", "127.0.0.1", "pod/"+web.Name, strconv.Itoa(local)+":8080")
			awaitOutput(t, out, fmt.Sprintf("Forwarding from 127.0.0.1:%d -> 8080", local), 30*time.Second, "kubectl port-forward listening")
			if code, body := get(t, &http.Client{Timeout: 10 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/", local)); code != 200 || !strings.Contains(body, web.Name) {
				t.Errorf("GET through kubectl port-forward = %d %q, want 200 naming pod %s", code, body, web.Name)
			}
			if !strings.Contains(out.String(), "Handling connection for "+strconv.Itoa(local)) {
				t.Errorf("kubectl port-forward did not report the connection:\n%s", out.String())
			}
		})
		t.Run("Attach", func(t *testing.T) {
			out, stdin := background(t, "attach", "-i", "pod/"+catPod.Name, "-c", "cat")
			stopWriting := make(chan struct{})
			defer close(stopWriting)
			// written until echoed: what cat reads before the attach is up is not streamed back
			go func() {
				for {
					select {
					case <-stopWriting:
						return
					case <-time.After(500 * time.Millisecond):
						if _, err := fmt.Fprintln(stdin, "through-kubectl"); err != nil {
							return
						}
					}
				}
			}()
			awaitOutput(t, out, "through-kubectl", 30*time.Second, "the line echoed through kubectl attach")
		})
	})
}
