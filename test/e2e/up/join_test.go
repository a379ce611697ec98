package up

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/server"
)

var (
	tokenRE  = regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`)
	caHashRE = regexp.MustCompile(`\bsha256:[0-9a-f]{64}\b`)
)

// TestLabJoin joins a machine the way hack/install.sh does on a real host, inside a `nodekit lab` node:
// `lab up --join-nodes 1` makes a node namespace with no agent; `nodekit token create` issues a token and
// the CA hash; install.sh agent --token --ca-hash runs for real inside that node (into a DESTDIR, no
// systemd); the test then starts the agent exactly as the installed unit would (its ExecStart, expanded
// with its EnvironmentFile) inside the node's namespace. The Node registers and turns Ready with a client
// certificate CN=system:node:<name>, O=system:nodes issued by the cluster CA through a CSR, a pod
// scheduled there runs; a wrong token secret (cluster-info's JWS does not verify), a token the API
// server refuses (signing usage only: 401) and a wrong CA hash fail with errors naming them and leave no
// Node and no kubeconfig; `lab down` leaves nothing behind.
func TestLabJoin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nodekit lab needs root (netns, bridge, containerd)")
	}
	l := startLab(t, "nkj", 0, 1)
	dataDir, nodekit, bin := l.dataDir, l.nodekit, binaries(t)
	base := filepath.Dir(dataDir)
	agent := &unitProcess{t: t, out: &syncBuffer{}}
	l.beforeDown = append(l.beforeDown, agent.stop)
	l.extraOnFail = func() { t.Logf("--- installed agent (last 40 lines)\n%s", tail(agent.out.String(), 40)) }
	st, err := cluster.ReadLabState(dataDir)
	if err != nil || len(st.Nodes) != 1 || !st.Nodes[0].Join {
		t.Fatalf("lab state: %v %+v", err, st)
	}
	node := st.Nodes[0]
	e := &env{dataDir: filepath.Join(dataDir, "server")}
	client := e.client(t)
	ctx := context.Background()
	adminKubeconfig := server.Config{DataDir: e.dataDir}.Paths().AdminKubeconfig
	kc, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	serverURL := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server
	if _, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("node %s exists before it joined: %v", node.Name, err)
	}

	// The server issues a token and prints the CA hash.
	tc, err := exec.Command(nodekit, "token", "create", "--kubeconfig", adminKubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("nodekit token create: %v\n%s", err, tc)
	}
	token, caHash := tokenRE.FindString(string(tc)), caHashRE.FindString(string(tc))
	if token == "" || caHash == "" {
		t.Fatalf("nodekit token create printed no token or CA hash:\n%s", tc)
	}

	// install.sh agent, for real, inside the node (DESTDIR: no systemd here; NODEKIT_SKIP_DEPS: no apt).
	destdir := filepath.Join(base, "root")
	install := exec.Command("nsenter", append([]string{"--net=/run/netns/" + node.Netns, "--", "bash", filepath.Join(hackDir(t), "install.sh"),
		"agent", "--server", serverURL, "--token", token, "--ca-hash", caHash, "--node-name", node.Name, "--node-ip", node.IP, "--"}, node.JoinArgs...)...)
	install.Env = append(os.Environ(), "DESTDIR="+destdir, "NODEKIT_SKIP_DEPS=1", "NODEKIT_BIN_DIR="+bin, "NODEKIT_DATA_DIR="+node.DataDir,
		"NODEKIT_IMAGES_DIR="+t.TempDir())
	if o, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install.sh agent: %v\n%s", err, o)
	}
	envFile := filepath.Join(destdir, "etc/nodekit/agent.env")
	if fi, err := os.Stat(envFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("agent.env: %v (mode %v), want 0600: it holds the token", err, fi)
	}
	argv, unitEnv := unitCommand(t, filepath.Join(destdir, "etc/systemd/system/nodekit-agent.service"), envFile)
	if strings.Contains(strings.Join(argv, " "), token) {
		t.Errorf("the token is on the agent's command line: %v", argv)
	}
	argv[0] = filepath.Join(destdir, argv[0]) // the installed binary, under DESTDIR
	t.Logf("installed agent: %s", strings.Join(argv, " "))

	// Start it as the unit would, inside the node's namespace.
	kubeconfigPath := filepath.Join(node.DataDir, "kubelet.kubeconfig")
	agent.argv, agent.env, agent.netns = argv, append(l.pathEnv, unitEnv...), node.Netns
	start := time.Now()
	agent.start()
	e.waitFor(t, client, 3*time.Minute, node.Name+" joined and Ready", func() (bool, string) {
		select {
		case <-agent.exited:
			t.Fatalf("the installed agent exited:\n%s", tail(agent.out.String(), 40))
		default:
		}
		n, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(n), "registered, not Ready"
	})
	// The join's own duration, as the agent logged it (discovery, CSR, approval, signing, kubeconfig).
	took := regexp.MustCompile(`msg="node joined".* took=(\S+)`).FindStringSubmatch(agent.out.String())
	if took == nil {
		t.Fatalf("the agent logged no join:\n%s", tail(agent.out.String(), 20))
	}
	t.Logf("FIGURE join: token join took %s (discovery → signed certificate → kubeconfig); Node Ready %v after the agent started",
		took[1], time.Since(start).Round(100*time.Millisecond))

	// Its credentials: a client certificate for system:node:<name> in system:nodes, issued by the cluster
	// CA, in a 0600 kubeconfig that trusts only the cluster CA.
	if fi, err := os.Stat(kubeconfigPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node kubeconfig: %v (mode %v), want 0600", err, fi)
	}
	nkc, err := clientcmd.LoadFromFile(kubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	// The kubeconfig names the agent's client certificate store (rotated in place), as upstream's kubelet.
	nctx := nkc.Contexts[nkc.CurrentContext]
	current := filepath.Join(node.DataDir, "kubelet", "pki", "kubelet-client-current.pem")
	if ai := nkc.AuthInfos[nctx.AuthInfo]; ai.ClientCertificate != current || ai.ClientKey != current {
		t.Fatalf("node kubeconfig user %s: client-certificate %q, client-key %q, want %s", nctx.AuthInfo, ai.ClientCertificate, ai.ClientKey, current)
	}
	certs, err := certutil.CertsFromFile(current)
	if err != nil {
		t.Fatal(err)
	}
	leaf := certs[0]
	if leaf.Subject.CommonName != "system:node:"+node.Name || strings.Join(leaf.Subject.Organization, ",") != "system:nodes" {
		t.Errorf("node client certificate subject %v, want CN=system:node:%s, O=system:nodes", leaf.Subject, node.Name)
	}
	cas, err := certutil.CertsFromFile(server.Config{DataDir: filepath.Join(dataDir, "server")}.Paths().CACert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cas[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("node client certificate not issued by the cluster CA for client auth: %v", err)
	}
	trusted, err := certutil.ParseCertsPEM(nkc.Clusters[nctx.Cluster].CertificateAuthorityData)
	if nkc.Clusters[nctx.Cluster].Server != serverURL || err != nil || len(trusted) != 1 || !trusted[0].Equal(cas[0]) {
		t.Errorf("node kubeconfig: server %q (want %q), CA data %v %d certs: want the cluster CA only", nkc.Clusters[nctx.Cluster].Server, serverURL, err, len(trusted))
	}
	clientCSRs, servingCSRs := csrsBySigner(ctx, t, client)
	if len(clientCSRs) != 1 || clientCSRs[0].Spec.Username != "system:bootstrap:"+strings.SplitN(token, ".", 2)[0] ||
		len(clientCSRs[0].Status.Certificate) == 0 {
		t.Errorf("want one signed client CSR by system:bootstrap:<token id>: %+v", clientCSRs)
	}
	// The kubelet's serving certificate: a kubelet-serving CSR from the node itself, auto-approved for
	// its addresses and signed; the kubelet serves it (the API server verifies kubelets against the CA).
	e.waitFor(t, client, 30*time.Second, "signed kubelet-serving CSR", func() (bool, string) {
		_, servingCSRs = csrsBySigner(ctx, t, client)
		return len(servingCSRs) == 1 && servingCSRs[0].Spec.Username == "system:node:"+node.Name && len(servingCSRs[0].Status.Certificate) > 0,
			fmt.Sprintf("%d serving CSRs", len(servingCSRs))
	})

	// A pod the scheduler places on the joined node runs.
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "joined", Namespace: "default"}, Spec: v1.PodSpec{
		NodeSelector: map[string]string{v1.LabelHostname: node.Name}, TerminationGracePeriodSeconds: new(int64),
		Containers: []v1.Container{{Name: "demo-server", Image: "nodekit.local/demo-server:v1"}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, client, 3*time.Minute, "pod on the joined node Running", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "joined", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName == node.Name && p.Status.Phase == v1.PodRunning && podReady(p), fmt.Sprintf("node %q phase %s", p.Spec.NodeName, p.Status.Phase)
	})

	// Wrong credentials: a wrong token secret, a token valid for signing cluster-info only (the API server
	// refuses it: 401), a wrong CA hash. The agent fails with an error naming the flag; no Node, no
	// kubeconfig.
	id := strings.SplitN(token, ".", 2)[0]
	sc, err := exec.Command(nodekit, "token", "create", "--kubeconfig", adminKubeconfig, "--usages", "signing").CombinedOutput()
	signingOnly := tokenRE.FindString(string(sc))
	if err != nil || signingOnly == "" {
		t.Fatalf("nodekit token create --usages signing: %v\n%s", err, sc)
	}
	for _, c := range []struct{ name, token, hash, want string }{
		{"wrong token secret", id + ".0000000000000000", caHash, `--token: the server's cluster-info signature for token id "` + id + `" does not verify`},
		{"token not for authentication", signingOnly, caHash, "--token: token rejected by the server"},
		{"wrong CA hash", token, "sha256:" + strings.Repeat("ab", 32), "--ca-hash sha256:" + strings.Repeat("ab", 32) + " does not match"},
	} {
		bad := node.Name + "-bad"
		dir := filepath.Join(base, "bad-"+strings.ReplaceAll(c.name, " ", "-"))
		cmd := exec.Command("nsenter", "--net=/run/netns/"+node.Netns, "--", argv[0], "agent", "--data-dir", dir,
			"--server", serverURL, "--kubeconfig", filepath.Join(dir, "kubelet.kubeconfig"), "--node-name", bad, "--node-ip", node.IP)
		cmd.Env = append(os.Environ(), "NODEKIT_TOKEN="+c.token, "NODEKIT_CA_HASH="+c.hash)
		done := make(chan struct{})
		var o []byte
		var err error
		go func() { o, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%s: the agent did not give up within a minute:\n%s", c.name, o)
		}
		if err == nil || !strings.Contains(string(o), c.want) {
			t.Errorf("%s: err=%v, want a failure with %q:\n%s", c.name, err, c.want, tail(string(o), 10))
		}
		if _, err := os.Stat(filepath.Join(dir, "kubelet.kubeconfig")); !os.IsNotExist(err) {
			t.Errorf("%s: a kubeconfig was written (%v)", c.name, err)
		}
		if _, err := client.CoreV1().Nodes().Get(ctx, bad, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: Node %s exists (%v)", c.name, bad, err)
		}
	}

	// A restart keeps the credentials (no second CSR).
	before, _ := os.ReadFile(kubeconfigPath)
	agent.stop()
	agent.start()
	e.waitFor(t, client, 2*time.Minute, "the restarted agent to keep its kubeconfig", func() (bool, string) {
		return strings.Contains(agent.out.String(), "node kubeconfig present and valid"), "no restart line yet"
	})
	after, _ := os.ReadFile(kubeconfigPath)
	if string(before) != string(after) {
		t.Error("the restarted agent rewrote its kubeconfig")
	}
	if clientCSRs, servingCSRs := csrsBySigner(ctx, t, client); len(clientCSRs) != 1 || len(servingCSRs) != 1 {
		t.Errorf("CSRs after a restart: %d client, %d serving, want still 1 each (the certificates are reused)", len(clientCSRs), len(servingCSRs))
	}

	// lab down: nothing left.
	l.downAndAssertGone(st)
}

// unitProcess is a command the test runs as a systemd unit would, inside a lab node's namespace.
type unitProcess struct {
	t         *testing.T
	argv, env []string
	netns     string
	out       *syncBuffer
	cmd       *exec.Cmd
	exited    chan struct{}
}

func (u *unitProcess) start() {
	u.t.Helper()
	u.cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + u.netns, "--"}, u.argv...)...)
	u.cmd.Env = append(os.Environ(), u.env...)
	u.cmd.Stdout, u.cmd.Stderr = u.out, u.out
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := u.cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	exited, cmd := make(chan struct{}), u.cmd
	u.exited = exited
	go func() { cmd.Wait(); close(exited) }()
}

// stop sends SIGTERM (as systemctl stop) and waits, SIGKILL after 90 s; only the PID it started.
func (u *unitProcess) stop() {
	if u.cmd == nil {
		return
	}
	_ = u.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.exited:
	case <-time.After(90 * time.Second):
		u.t.Errorf("%s (pid %d) ignored SIGTERM for 90s", u.argv[0], u.cmd.Process.Pid)
		_ = u.cmd.Process.Kill()
		<-u.exited
	}
	u.cmd = nil
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// unitCommand reads a systemd unit's ExecStart and its EnvironmentFile and returns the command line as
// systemd would run it — "${VAR}" is one word, "$VAR" splits into words — and the file's variables as
// the environment it would get.
func unitCommand(t *testing.T, unit, envFile string) (argv, environ []string) {
	t.Helper()
	vars := map[string]string{}
	f, err := os.Open(envFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil && strings.HasPrefix(v, `"`) {
			v = uq
		}
		vars[k] = v
		environ = append(environ, k+"="+v)
	}
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	var exec string
	for _, l := range strings.Split(string(b), "\n") {
		if s, ok := strings.CutPrefix(l, "ExecStart="); ok {
			exec = s
		}
	}
	if exec == "" {
		t.Fatalf("%s has no ExecStart", unit)
	}
	for _, w := range strings.Fields(exec) {
		switch {
		case strings.HasPrefix(w, "${") && strings.HasSuffix(w, "}"):
			argv = append(argv, vars[w[2:len(w)-1]])
		case strings.HasPrefix(w, "$"):
			argv = append(argv, strings.Fields(vars[w[1:]])...)
		default:
			argv = append(argv, w)
		}
	}
	return argv, environ
}

// TestInstallScriptToken: install.sh agent --token --ca-hash writes the token and hash into agent.env
// (0600) as NODEKIT_TOKEN and NODEKIT_CA_HASH, off the agent's command line, and points the agent at the
// kubeconfig its join writes in the data dir; malformed or missing values are refused, naming the flag.
func TestInstallScriptToken(t *testing.T) {
	hack, bin := hackDir(t), binaries(t)
	run := func(destdir string, args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{filepath.Join(hack, "install.sh")}, args...)...)
		cmd.Env = append(os.Environ(), "NODEKIT_BIN_DIR="+bin, "DESTDIR="+destdir, "NODEKIT_SKIP_DEPS=1", "NODEKIT_DATA_DIR=/var/lib/nk",
			"NODEKIT_IMAGES_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	const token = "abcdef.0123456789abcdef"
	hash := "sha256:" + strings.Repeat("0f", 32)
	dest := t.TempDir()
	if out, err := run(dest, "agent", "--server", "https://192.168.56.10:6443", "--token", token, "--ca-hash", hash, "--node-name", "agent1"); err != nil {
		t.Fatalf("install.sh agent --token: %v\n%s", err, out)
	}
	envFile := filepath.Join(dest, "etc/nodekit/agent.env")
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, w := range []string{"NODEKIT_TOKEN=" + token + "\n", "NODEKIT_CA_HASH=" + hash + "\n",
		`NODEKIT_AGENT_ARGS="--server https://192.168.56.10:6443 --kubeconfig /var/lib/nk/kubelet.kubeconfig --cluster-dns 10.96.0.10 --cluster-domain cluster.local --node-name agent1"`} {
		if !strings.Contains(env, w) {
			t.Errorf("agent.env lacks %q:\n%s", w, env)
		}
	}
	if fi, _ := os.Stat(envFile); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("agent.env mode %v, want 0600", fi)
	}
	argv, _ := unitCommand(t, filepath.Join(dest, "etc/systemd/system/nodekit-agent.service"), envFile)
	if got := strings.Join(argv, " "); got != "/usr/local/bin/nodekit agent --data-dir /var/lib/nk --server https://192.168.56.10:6443 --kubeconfig /var/lib/nk/kubelet.kubeconfig --cluster-dns 10.96.0.10 --cluster-domain cluster.local --node-name agent1" {
		t.Errorf("the unit runs %q", got)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "abcdef"}, "--token is not a bootstrap token"},
		{[]string{"--token", token}, "--ca-hash sha256:HEX is required with --token"},
		{[]string{"--token", token, "--ca-hash", "sha256:abc"}, "--ca-hash 'sha256:abc' is not sha256: and 64 hex digits"},
		{[]string{"--kubeconfig", envFile, "--ca-hash", hash}, "--ca-hash goes with --token"},
	} {
		out, err := run(t.TempDir(), append([]string{"agent", "--server", "https://x:6443"}, c.args...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("install.sh agent %v: err=%v, output %q, want an error with %q", c.args, err, out, c.want)
		}
	}
}

// csrsBySigner lists the cluster's CSRs of the kubelet client and kubelet serving signers.
func csrsBySigner(ctx context.Context, t *testing.T, client kubernetes.Interface) (clientCSRs, servingCSRs []certificatesv1.CertificateSigningRequest) {
	t.Helper()
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list CSRs: %v", err)
	}
	for _, c := range csrs.Items {
		switch c.Spec.SignerName {
		case certificatesv1.KubeAPIServerClientKubeletSignerName:
			clientCSRs = append(clientCSRs, c)
		case certificatesv1.KubeletServingSignerName:
			servingCSRs = append(servingCSRs, c)
		}
	}
	return clientCSRs, servingCSRs
}
