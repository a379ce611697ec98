package kubelet

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// resolvConf is the parsed host resolver configuration.
type resolvConf struct {
	servers, searches, options []string
}

func parseResolvConf(path string) (resolvConf, error) {
	var rc resolvConf
	f, err := os.Open(path)
	if err != nil {
		return rc, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) > 1 {
				rc.servers = append(rc.servers, fields[1])
			}
		case "search":
			rc.searches = fields[1:]
		case "options":
			rc.options = append(rc.options, fields[1:]...)
		}
	}
	return rc, sc.Err()
}

// GetPodDNS returns the sandbox DNS config for the pod's dnsPolicy (Kubernetes "Pod's DNS Policy"):
// ClusterFirst (the default) gives the cluster DNS servers, the searches <ns>.svc.<domain>,
// svc.<domain>, <domain> followed by the host's, and ndots:5 — falling back to Default when no cluster
// DNS is configured or for hostNetwork pods (unless ClusterFirstWithHostNet); Default copies the host's
// resolv.conf; None starts empty. spec.dnsConfig is then merged in (servers and searches appended,
// options replaced by name).
func (k *Kubelet) GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault
	}
	if (policy == v1.DNSClusterFirst || policy == v1.DNSClusterFirstWithHostNet) && len(k.cfg.ClusterDNS) == 0 {
		k.log.Debug("no cluster DNS configured, pod gets the host's DNS", "pod", pod.Namespace+"/"+pod.Name)
		policy = v1.DNSDefault
	}
	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case v1.DNSNone:
	case v1.DNSDefault:
		rc, err := parseResolvConf(k.cfg.ResolvConf)
		if err != nil {
			return nil, fmt.Errorf("dnsPolicy Default: %w", err)
		}
		cfg.Servers, cfg.Searches, cfg.Options = rc.servers, rc.searches, rc.options
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet:
		for _, ip := range k.cfg.ClusterDNS {
			cfg.Servers = append(cfg.Servers, ip.String())
		}
		d := k.cfg.ClusterDomain
		cfg.Searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		if rc, err := parseResolvConf(k.cfg.ResolvConf); err == nil {
			cfg.Searches = append(cfg.Searches, rc.searches...)
		}
		cfg.Options = []string{"ndots:5"}
	default:
		return nil, fmt.Errorf("spec.dnsPolicy: unsupported value %q", policy)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = append(cfg.Servers, dc.Nameservers...)
		cfg.Searches = append(cfg.Searches, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			kept := cfg.Options[:0:0]
			for _, existing := range cfg.Options {
				if name, _, _ := strings.Cut(existing, ":"); name != o.Name {
					kept = append(kept, existing)
				}
			}
			cfg.Options = append(kept, opt)
		}
	}
	if len(cfg.Searches) > 32 {
		cfg.Searches = cfg.Searches[:32]
	}
	return cfg, nil
}
