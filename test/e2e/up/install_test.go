package up

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/images/build"
)

// The real-machine path (hack/): what can be checked without systemd or Vagrant.

func hackDir(t *testing.T) string {
	t.Helper()
	mod, err := build.FindModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(mod, "hack")
}

func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s is not installed (apt-get install %s)", tool, pkg)
	}
	return p
}

// TestShellcheckScripts runs shellcheck on every shell script under hack/ and hack/vm/ (the VM test leg).
func TestShellcheckScripts(t *testing.T) {
	sc := need(t, "shellcheck", "shellcheck")
	scripts, _ := filepath.Glob(filepath.Join(hackDir(t), "*.sh"))
	vm, _ := filepath.Glob(filepath.Join(hackDir(t), "vm", "*.sh"))
	scripts = append(scripts, vm...)
	if len(scripts) == 0 {
		t.Fatal("no scripts in hack/")
	}
	out, err := exec.Command(sc, append([]string{"--severity=style"}, scripts...)...).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck %v: %v\n%s", scripts, err, out)
	}
}

// TestSystemdUnits checks the units with systemd-analyze verify (no warning allowed) and their key
// settings: Type=notify, a restart policy, limits, KillMode=process for the agent (which runs the
// service proxy too: there is no proxy unit).
func TestSystemdUnits(t *testing.T) {
	units, _ := filepath.Glob(filepath.Join(hackDir(t), "systemd", "*.service"))
	if len(units) != 2 {
		t.Fatalf("want the server and agent units, found %v", units)
	}
	exe, _ := os.Executable() // any existing executable stands in for /usr/local/bin/nodekit
	tmp := t.TempDir()
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		name := filepath.Base(u)
		want := []string{"Restart=always", "RestartSec=", "LimitNOFILE=1048576", "EnvironmentFile=-/etc/nodekit/", "WantedBy=multi-user.target",
			"Type=notify", "NotifyAccess=main", "TasksMax=infinity", "--data-dir ${NODEKIT_DATA_DIR}"}
		if name == "nodekit-agent.service" {
			want = append(want, "KillMode=process", "Delegate=yes")
		}
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(strings.ReplaceAll(s, "/usr/local/bin/nodekit", exe)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: unit syntax not verified")
		return
	}
	files, _ := filepath.Glob(filepath.Join(tmp, "*.service"))
	out, err := exec.Command(sa, append([]string{"verify"}, files...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestInstallScript runs hack/install.sh for real into a DESTDIR, as a server and as an agent, and checks
// what it installed; bad invocations fail with a message naming the problem.
func TestInstallScript(t *testing.T) {
	hack := hackDir(t)
	bin := binaries(t)
	// The server gets an image archive to install; the agent none.
	images := t.TempDir()
	if err := os.WriteFile(filepath.Join(images, "coredns-v1.15.0.tar"), []byte("archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	imagesFor := map[string]string{"server": images, "agent": t.TempDir()}
	run := func(destdir string, args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{filepath.Join(hack, "install.sh")}, args...)...)
		cmd.Env = append(os.Environ(), "NODEKIT_BIN_DIR="+bin, "DESTDIR="+destdir, "NODEKIT_SKIP_DEPS=1", "NODEKIT_IMAGES_DIR="+imagesFor[args[0]])
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	srv := t.TempDir()
	if out, err := run(srv, "server", "--advertise-address", "192.168.56.10", "--node-name", "server", "--", "--cluster-cidr", "10.42.0.0/16"); err != nil {
		t.Fatalf("install.sh server: %v\n%s", err, out)
	}
	for _, f := range []string{"usr/local/bin/nodekit", "usr/local/bin/nodekit-cni"} {
		if fi, err := os.Stat(filepath.Join(srv, f)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v (mode %v)", f, err, fi)
		}
	}
	for _, u := range []string{"nodekit-server.service", "nodekit-agent.service"} {
		if !strings.Contains(read(filepath.Join(srv, "etc/systemd/system", u)), "ExecStart=/usr/local/bin/nodekit ") {
			t.Errorf("%s not installed with the nodekit binary path", u)
		}
	}
	if env := read(filepath.Join(srv, "etc/nodekit/server.env")); !strings.Contains(env, `NODEKIT_SERVER_ARGS="--advertise-address 192.168.56.10 --cluster-cidr 10.42.0.0/16"`) {
		t.Errorf("server.env:\n%s", env)
	}
	if fi, _ := os.Stat(filepath.Join(srv, "etc/nodekit/server.env")); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("server.env mode %v, want 0600", fi)
	}
	if env := read(filepath.Join(srv, "etc/nodekit/agent.env")); !strings.Contains(env, `NODEKIT_AGENT_ARGS="--kubeconfig /var/lib/nodekit/admin.kubeconfig --cluster-dns 10.96.0.10 --cluster-domain cluster.local --node-name server"`) {
		t.Errorf("server's agent.env:\n%s", env)
	}
	if got := read(filepath.Join(srv, "var/lib/nodekit/images/coredns-v1.15.0.tar")); got != "archive" {
		t.Errorf("image archive installed as %q", got)
	}

	agent := t.TempDir()
	kc := filepath.Join(t.TempDir(), "node.kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(agent, "agent", "--server", "https://192.168.56.10:6443", "--kubeconfig", kc, "--node-name", "agent1", "--node-ip", "192.168.56.11", "--cluster-dns", "10.43.0.10"); err != nil {
		t.Fatalf("install.sh agent: %v\n%s", err, out)
	}
	env := read(filepath.Join(agent, "etc/nodekit/agent.env"))
	for _, w := range []string{`NODEKIT_AGENT_ARGS="--server https://192.168.56.10:6443 --kubeconfig /etc/nodekit/agent.kubeconfig --cluster-dns 10.43.0.10 --cluster-domain cluster.local --node-name agent1 --node-ip 192.168.56.11"`} {
		if !strings.Contains(env, w) {
			t.Errorf("agent.env lacks %s:\n%s", w, env)
		}
	}
	if read(filepath.Join(agent, "etc/nodekit/agent.kubeconfig")) != "apiVersion: v1\nkind: Config\n" {
		t.Error("the agent's kubeconfig was not installed")
	}
	if _, err := os.Stat(filepath.Join(agent, "etc/systemd/system/nodekit-server.service")); err == nil {
		t.Error("an agent install must not install the server unit")
	}
	// Reinstalling over an install that had nodekit-proxy.service removes it (the agent runs the proxy).
	old := filepath.Join(agent, "etc/systemd/system/nodekit-proxy.service")
	if err := os.WriteFile(old, []byte("[Service]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(agent, "agent", "--server", "https://192.168.56.10:6443", "--kubeconfig", kc); err != nil {
		t.Fatalf("install.sh agent again: %v\n%s", err, out)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old nodekit-proxy.service is still installed (%v)", err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "unknown role 'worker'"},
		{[]string{"agent", "--kubeconfig", kc}, "--server https://HOST:6443 is required"},
		{[]string{"agent", "--server", "http://x:6443", "--kubeconfig", kc}, "must be an https:// URL"},
		{[]string{"agent", "--server", "https://x:6443"}, "--token TOKEN or --kubeconfig FILE is required"},
		{[]string{"agent", "--server", "https://x:6443", "--token", "t", "--kubeconfig", kc}, "not both"},
		{[]string{"server", "--bogus"}, "unknown flag '--bogus'"},
	} {
		out, err := run(t.TempDir(), c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("install.sh %v: err=%v, output %q, want an error with %q", c.args, err, out, c.want)
		}
	}
}

// vagrantHarness evaluates a Vagrantfile against a recording stand-in of Vagrant's configuration API
// and prints the machines it defines as JSON: name, hostname, IP, box, provider CPUs/memory and the
// inline provisioning scripts.
const vagrantHarness = `
require "json"
class Rec
  def initialize(h) ; @h = h ; end
  def method_missing(name, *args, &blk)
    key = name.to_s
    if key.end_with?("=")
      @h[key.chomp("=")] = args.first
      return
    end
    return Rec.new(@h[key] ||= {}) if args.empty? && blk.nil?
    case key
    when "define"
      m = { "name" => args.first.to_s }
      (@h["machines"] ||= []) << m
      blk.call(Rec.new(m))
    when "provider"
      p = (@h["providers"] ||= {})[args.first.to_s] = {}
      blk.call(Rec.new(p), Rec.new(p["override"] ||= {}))
    when "provision"
      (@h["provision"] ||= []) << { "type" => args[0].to_s }.merge(args[1].transform_keys(&:to_s))
    when "network"
      (@h["network"] ||= []) << [args[0].to_s, args[1]]
    when "synced_folder"
      (@h["synced"] ||= []) << args
    end
    nil
  end
  def respond_to_missing?(*) = true
end
module Vagrant
  def self.configure(_v)
    $root = {}
    yield Rec.new($root)
  end
end
load ARGV[0]
puts JSON.generate($root)
`

// TestVagrantfile checks hack/vagrant/Vagrantfile with ruby -c and evaluates it with AGENTS=3, CPUS=3,
// MEMORY=3072: a server and agent1..agent3, the box, CPUs and memory as given, and provisioning through
// hack/install.sh (server first, agents joining the server's address) in shell scripts bash accepts.
func TestVagrantfile(t *testing.T) {
	ruby := need(t, "ruby", "ruby")
	vf := filepath.Join(hackDir(t), "vagrant", "Vagrantfile")
	if out, err := exec.Command(ruby, "-c", vf).CombinedOutput(); err != nil {
		t.Fatalf("ruby -c: %v\n%s", err, out)
	}
	h := filepath.Join(t.TempDir(), "harness.rb")
	if err := os.WriteFile(h, []byte(vagrantHarness), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ruby, h, vf)
	cmd.Dir = filepath.Dir(vf)
	cmd.Env = append(os.Environ(), "AGENTS=3", "CPUS=3", "MEMORY=3072", "BOX=debian/bookworm64")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("evaluating the Vagrantfile: %v\n%s", err, stderr.String())
	}
	var cfg struct {
		VM struct {
			Box       string `json:"box"`
			Providers map[string]struct {
				CPUs   int `json:"cpus"`
				Memory int `json:"memory"`
			} `json:"providers"`
			Machines []struct {
				Name string `json:"name"`
				VM   struct {
					Hostname  string           `json:"hostname"`
					Network   [][2]any         `json:"network"`
					Provision []map[string]any `json:"provision"`
				} `json:"vm"`
			} `json:"machines"`
		} `json:"vm"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if cfg.VM.Box != "debian/bookworm64" {
		t.Errorf("box %q", cfg.VM.Box)
	}
	for name, p := range cfg.VM.Providers {
		if p.CPUs != 3 || p.Memory != 3072 {
			t.Errorf("provider %s: cpus=%d memory=%d, want 3 and 3072", name, p.CPUs, p.Memory)
		}
	}
	var names []string
	for _, m := range cfg.VM.Machines {
		names = append(names, m.Name)
		if m.VM.Hostname != m.Name {
			t.Errorf("%s: hostname %q", m.Name, m.VM.Hostname)
		}
		if len(m.VM.Provision) != 1 {
			t.Fatalf("%s: %d provisioners, want 1", m.Name, len(m.VM.Provision))
		}
		script, _ := m.VM.Provision[0]["inline"].(string)
		role := "agent"
		if m.Name == "server" {
			role = "server"
		}
		// The same provisioning script as the VM test leg (hack/vm/run.sh).
		if !strings.Contains(script, "/nodekit/hack/provision.sh "+role) {
			t.Errorf("%s provisioning does not call provision.sh %s:\n%s", m.Name, role, script)
		}
		if role == "agent" && !regexp.MustCompile(`--server-ip 192\.168\.56\.10\b`).MatchString(script) {
			t.Errorf("%s does not join the server:\n%s", m.Name, script)
		}
		if out, err := exec.Command("bash", "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("%s provisioning script: bash -n: %v\n%s", m.Name, err, out)
		}
	}
	if strings.Join(names, ",") != "server,agent1,agent2,agent3" {
		t.Errorf("machines %v, want server,agent1,agent2,agent3", names)
	}
	// Bad sizes are refused at load time.
	bad := exec.Command(ruby, h, vf)
	bad.Dir = filepath.Dir(vf)
	bad.Env = append(os.Environ(), "AGENTS=many")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "invalid value for Integer") {
		t.Errorf("AGENTS=many accepted: %v %s", err, out)
	}
}
