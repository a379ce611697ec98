package config

import (
	"fmt"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Flags binds the upstream kubelet flags that map to KubeletConfiguration fields. Register them with
// AddFlags, parse the command line, then call Resolve to get the effective configuration.
type Flags struct {
	// ConfigFile is --config: the KubeletConfiguration file, or "" for defaults only.
	ConfigFile string

	fs    *pflag.FlagSet
	cfg   *kubeletv1beta1.KubeletConfiguration
	names map[string]bool // the flags bound to cfg
}

// AddFlags registers --config and the kubelet flags that override KubeletConfiguration fields (upstream
// names: --address, --port, --tls-cert-file, --tls-private-key-file, --client-ca-file,
// --pod-manifest-path, --pod-logs-dir, --sync-frequency, --cluster-dns, --cluster-domain, --resolv-conf,
// --node-status-update-frequency, --max-pods, --cgroup-root, --cgroup-driver, --register-with-taints,
// --container-runtime-endpoint, --image-service-endpoint, --enable-profiling-handler) on fs. Their defaults are Default()'s.
func AddFlags(fs *pflag.FlagSet) *Flags { return BindFlags(fs, Default(), "") }

// BindFlags is AddFlags with the flags bound to cfg (whose current values are their defaults, and
// Resolve's base when there is no --config) and configFile as --config's default. It serves callers
// that render a configuration back into flags (pflag.Flag.Value.String of each flag named by Names).
func BindFlags(fs *pflag.FlagSet, cfg *kubeletv1beta1.KubeletConfiguration, configFile string) *Flags {
	f := &Flags{fs: fs, cfg: cfg, names: map[string]bool{}}
	c := f.cfg
	fs.StringVar(&f.ConfigFile, "config", configFile, "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); flags set explicitly override it")
	before := map[string]bool{}
	fs.VisitAll(func(fl *pflag.Flag) { before[fl.Name] = true })
	defer fs.VisitAll(func(fl *pflag.Flag) {
		if !before[fl.Name] {
			f.names[fl.Name] = true
		}
	})
	fs.StringVar(&c.Address, "address", c.Address, "IP address the kubelet server listens on")
	fs.Int32Var(&c.Port, "port", c.Port, "port of the kubelet server (HTTPS)")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "serving certificate of the kubelet server; empty = a self-signed one under the root dir")
	fs.StringVar(&c.TLSPrivateKeyFile, "tls-private-key-file", c.TLSPrivateKeyFile, "private key of --tls-cert-file")
	fs.StringVar(&c.Authentication.X509.ClientCAFile, "client-ca-file", c.Authentication.X509.ClientCAFile, "CA bundle that signs client certificates accepted by the kubelet server; empty = the cluster CA from the kubeconfig")
	fs.StringVar(&c.StaticPodPath, "pod-manifest-path", c.StaticPodPath, "directory of static pod manifests")
	fs.StringVar(&c.PodLogsDir, "pod-logs-dir", c.PodLogsDir, "directory of the pods' CRI log files")
	fs.DurationVar(&c.SyncFrequency.Duration, "sync-frequency", c.SyncFrequency.Duration, "max period between syncs of running pods")
	fs.StringSliceVar(&c.ClusterDNS, "cluster-dns", c.ClusterDNS, "comma-separated cluster DNS server IPs given to pods")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", c.ClusterDomain, "cluster DNS domain, e.g. cluster.local")
	if c.ResolverConfig == nil {
		c.ResolverConfig = new(string)
	}
	fs.StringVar(c.ResolverConfig, "resolv-conf", *c.ResolverConfig, "resolver configuration file that pods with dnsPolicy Default get (and ClusterFirst pods' extra search domains)")
	fs.DurationVar(&c.NodeStatusUpdateFrequency.Duration, "node-status-update-frequency", c.NodeStatusUpdateFrequency.Duration, "how often the node status is computed (and posted when changed)")
	fs.Int32Var(&c.MaxPods, "max-pods", c.MaxPods, "pods capacity of the node")
	fs.StringVar(&c.CgroupRoot, "cgroup-root", c.CgroupRoot, "parent cgroup of the pods' cgroups (kubepods); empty = the root \"/\"")
	fs.StringVar(&c.CgroupDriver, "cgroup-driver", c.CgroupDriver, "cgroupfs or systemd; unset follows the runtime (CRI RuntimeConfig, or containerd 1.x's SystemdCgroup), which a set value must match")
	fs.Var(&taintsValue{taints: &c.RegisterWithTaints}, "register-with-taints", "taints the Node is registered with: key[=value]:Effect,...")
	fs.StringVar(&c.ContainerRuntimeEndpoint, "container-runtime-endpoint", c.ContainerRuntimeEndpoint, "CRI runtime endpoint (unix:///path); empty = start nodekit's managed containerd")
	if c.EnableProfilingHandler == nil {
		c.EnableProfilingHandler = new(bool)
	}
	fs.BoolVar(c.EnableProfilingHandler, "enable-profiling-handler", *c.EnableProfilingHandler, "serve Go's pprof profiles on the kubelet server's /debug/pprof/ (authorized as nodes/proxy)")
	fs.StringVar(&c.ImageServiceEndpoint, "image-service-endpoint", c.ImageServiceEndpoint, "CRI image service endpoint; empty = the runtime endpoint")
	return f
}

// Names returns the names of the flags bound to KubeletConfiguration fields (all but --config), sorted.
func (f *Flags) Names() []string {
	names := make([]string, 0, len(f.names))
	for n := range f.names {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Resolve returns the effective configuration: Default(), overlaid with --config's file (if any),
// overlaid with every flag of AddFlags that was set explicitly on the command line (pflag's Changed).
// It is validated; errors name the file or the flag.
func (f *Flags) Resolve() (*kubeletv1beta1.KubeletConfiguration, error) {
	if f.ConfigFile == "" {
		if err := Validate(f.cfg); err != nil {
			return nil, fmt.Errorf("flags: %w", err)
		}
		return f.cfg.DeepCopy(), nil
	}
	// Remember the explicitly set flags as text, load the file into the bound struct, then set the
	// flags again so they win.
	type setFlag struct {
		flag  *pflag.Flag
		value []string
	}
	var set []setFlag
	f.fs.Visit(func(fl *pflag.Flag) {
		if !f.names[fl.Name] {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			set = append(set, setFlag{fl, sv.GetSlice()})
		} else {
			set = append(set, setFlag{fl, []string{fl.Value.String()}})
		}
	})
	fileCfg, err := LoadFile(f.ConfigFile)
	if err != nil {
		return nil, err
	}
	*f.cfg = *fileCfg
	for _, s := range set {
		var err error
		if sv, ok := s.flag.Value.(pflag.SliceValue); ok {
			err = sv.Replace(s.value)
		} else {
			err = s.flag.Value.Set(s.value[0])
		}
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", s.flag.Name, err)
		}
	}
	if err := Validate(f.cfg); err != nil {
		return nil, fmt.Errorf("kubelet config %s with flags: %w", f.ConfigFile, err)
	}
	return f.cfg.DeepCopy(), nil
}

// ParseTaints parses the --register-with-taints syntax "key[=value]:Effect[,...]" into taints. Errors
// name the offending entry.
func ParseTaints(spec string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, s := range splitList(spec) {
		kv, effect, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("taint %q: missing :Effect (want key[=value]:Effect)", s)
		}
		key, value, _ := strings.Cut(kv, "=")
		t := v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)}
		if err := validateTaint(t); err != nil {
			return nil, fmt.Errorf("taint %q: %w", s, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// ParseLabels parses the --node-labels syntax "key=value[,...]" into a map, validating keys as
// qualified names and values as label values, and refusing, as upstream's kubelet, kubernetes.io and
// k8s.io labels outside the kubelet's own set (NodeRestriction would refuse the registration). Errors
// name the offending entry.
func ParseLabels(spec string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range splitList(spec) {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("label %q: want key=value", s)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label %q: key: %s", s, errs[0])
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %q: value: %s", s, errs[0])
		}
		if ns, _, _ := strings.Cut(k, "/"); strings.Contains(k, "/") && (ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") ||
			ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")) && !kubeletapis.IsKubeletLabel(k) {
			return nil, fmt.Errorf("label %q: a node may not set %q labels outside the kubelet's own set (kubelet.kubernetes.io/, node.kubernetes.io/ and the well-known ones): NodeRestriction refuses them; an administrator sets them", s, ns)
		}
		out[k] = v
	}
	return out, nil
}

// taintsValue is the pflag.Value (and SliceValue) of --register-with-taints.
type taintsValue struct{ taints *[]v1.Taint }

func (v *taintsValue) Set(s string) error {
	t, err := ParseTaints(s)
	if err != nil {
		return err
	}
	*v.taints = t
	return nil
}

func (v *taintsValue) String() string { return strings.Join(v.GetSlice(), ",") }
func (v *taintsValue) Type() string   { return "taints" }

func (v *taintsValue) GetSlice() []string {
	var out []string
	for _, t := range *v.taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		out = append(out, s+":"+string(t.Effect))
	}
	return out
}

func (v *taintsValue) Append(s string) error {
	t, err := ParseTaints(s)
	if err != nil {
		return err
	}
	*v.taints = append(*v.taints, t...)
	return nil
}

func (v *taintsValue) Replace(ss []string) error {
	*v.taints = nil
	for _, s := range ss {
		if err := v.Append(s); err != nil {
			return err
		}
	}
	return nil
}

// splitList splits a comma-separated flag value into its trimmed, non-empty entries.
func splitList(spec string) []string {
	var out []string
	for _, s := range strings.Split(spec, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
