package kubelet

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubelet/fieldpath"
	"github.com/nodekit/nodekit/kubelet/kuberuntime"
	"github.com/nodekit/nodekit/kubelet/volumes"
)

// envList keeps env vars in first-definition order, later definitions replacing the value.
type envList struct {
	order []string
	vals  map[string]string
}

func (e *envList) set(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.order = append(e.order, k)
	}
	e.vals[k] = v
}

func (e *envList) lookup(k string) (string, bool) { v, ok := e.vals[k]; return v, ok }

// serviceEnv returns the docker-links style variables for the services visible to the pod: those of
// its namespace when enableServiceLinks is unset or true, and always the "kubernetes" service of the
// default namespace (Kubernetes "Discovering services: environment variables").
func (k *Kubelet) serviceEnv(pod *v1.Pod) map[string]string {
	out := map[string]string{}
	if k.services == nil {
		return out
	}
	all, err := k.services.List(labels.Everything())
	if err != nil {
		return out
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for _, svc := range all {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
			continue
		}
		master := svc.Namespace == metav1.NamespaceDefault && svc.Name == "kubernetes"
		if !master && (!links || svc.Namespace != pod.Namespace) {
			continue
		}
		name := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_"))
		ip := svc.Spec.ClusterIP
		out[name+"_SERVICE_HOST"] = ip
		out[name+"_SERVICE_PORT"] = strconv.Itoa(int(svc.Spec.Ports[0].Port))
		for i, p := range svc.Spec.Ports {
			port := strconv.Itoa(int(p.Port))
			if p.Name != "" {
				out[name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = port
			}
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			url := proto + "://" + net.JoinHostPort(ip, port)
			if i == 0 {
				out[name+"_PORT"] = url
			}
			prefix := name + "_PORT_" + port + "_" + strings.ToUpper(proto)
			out[prefix] = url
			out[prefix+"_PROTO"] = proto
			out[prefix+"_PORT"] = port
			out[prefix+"_ADDR"] = ip
		}
	}
	return out
}

// makeEnv resolves the container's environment: envFrom (configMap/secret, with prefix, names that are not
// relaxed env var names (printable ASCII without "=", as upstream's RelaxedEnvironmentVariableValidation)
// skipped), then env (value with $(VAR) expansion, fieldRef, resourceFieldRef, configMapKeyRef,
// secretKeyRef, honouring optional), then service variables not already defined. A missing
// non-optional source is an error naming it.
func (k *Kubelet) makeEnv(ctx context.Context, pod *v1.Pod, c *v1.Container) ([]*runtimeapi.KeyValue, error) {
	env := &envList{vals: map[string]string{}}
	cms := map[string]*v1.ConfigMap{}
	secrets := map[string]*v1.Secret{}
	getCM := func(name string, optional *bool) (*v1.ConfigMap, error) {
		if cm, ok := cms[name]; ok {
			return cm, nil
		}
		cm, err := k.objects.GetConfigMap(ctx, pod.Namespace, name)
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("configmap %q: %w", name, err)
		}
		cms[name] = cm
		return cm, nil
	}
	getSecret := func(name string, optional *bool) (*v1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		s, err := k.objects.GetSecret(ctx, pod.Namespace, name)
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("secret %q: %w", name, err)
		}
		secrets[name] = s
		return s, nil
	}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := getCM(ef.ConfigMapRef.Name, ef.ConfigMapRef.Optional)
			if err != nil {
				return nil, err
			}
			if cm == nil {
				continue
			}
			keys := sortedKeys(cm.Data)
			for _, key := range keys {
				if n := ef.Prefix + key; len(validation.IsRelaxedEnvVarName(n)) == 0 {
					env.set(n, cm.Data[key])
				}
			}
		case ef.SecretRef != nil:
			s, err := getSecret(ef.SecretRef.Name, ef.SecretRef.Optional)
			if err != nil {
				return nil, err
			}
			if s == nil {
				continue
			}
			for _, key := range sortedKeys(s.Data) {
				if n := ef.Prefix + key; len(validation.IsRelaxedEnvVarName(n)) == 0 {
					env.set(n, string(s.Data[key]))
				}
			}
		}
	}
	svcEnv := k.serviceEnv(pod)
	lookup := func(name string) (string, bool) {
		if v, ok := env.lookup(name); ok {
			return v, true
		}
		v, ok := svcEnv[name]
		return v, ok
	}
	for _, e := range c.Env {
		vf := e.ValueFrom
		if vf == nil {
			env.set(e.Name, kuberuntime.ExpandVars(e.Value, lookup))
			continue
		}
		var val string
		var err error
		switch {
		case vf.FieldRef != nil:
			val, err = fieldpath.Extract(pod, vf.FieldRef.FieldPath)
		case vf.ResourceFieldRef != nil:
			target := c
			if n := vf.ResourceFieldRef.ContainerName; n != "" && n != c.Name {
				if target = fieldpath.Container(pod, n); target == nil {
					err = fmt.Errorf("resourceFieldRef: no container %q", n)
				}
			}
			if err == nil {
				val, err = fieldpath.Resource(target, vf.ResourceFieldRef, k.nodeAllocatable())
			}
		case vf.ConfigMapKeyRef != nil:
			ref := vf.ConfigMapKeyRef
			var cm *v1.ConfigMap
			if cm, err = getCM(ref.Name, ref.Optional); err == nil && cm != nil {
				v, ok := cm.Data[ref.Key]
				if !ok && !(ref.Optional != nil && *ref.Optional) {
					err = fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
				} else if !ok {
					continue
				}
				val = v
			} else if err == nil {
				continue
			}
		case vf.SecretKeyRef != nil:
			ref := vf.SecretKeyRef
			var s *v1.Secret
			if s, err = getSecret(ref.Name, ref.Optional); err == nil && s != nil {
				v, ok := s.Data[ref.Key]
				if !ok && !(ref.Optional != nil && *ref.Optional) {
					err = fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
				} else if !ok {
					continue
				}
				val = string(v)
			} else if err == nil {
				continue
			}
		default:
			err = fmt.Errorf("env %q: valueFrom has no source", e.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("env %q: %w", e.Name, err)
		}
		env.set(e.Name, val)
	}
	for _, key := range sortedKeys(svcEnv) {
		if _, ok := env.lookup(key); !ok {
			env.set(key, svcEnv[key])
		}
	}
	out := make([]*runtimeapi.KeyValue, 0, len(env.order))
	for _, key := range env.order {
		out = append(out, &runtimeapi.KeyValue{Key: key, Value: []byte(env.vals[key])})
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// makeMounts maps the container's volumeMounts to CRI mounts on the volumes' host paths (subPath and
// subPathExpr resolved beneath them, created when missing, and bind-mounted by volumes.SubPath, so a
// symlink can never lead outside the volume) and adds the kubelet-managed /etc/hosts for pods
// not on the host network.
func (k *Kubelet) makeMounts(pod *v1.Pod, c *v1.Container, paths map[string]string, env []*runtimeapi.KeyValue, podIPs []string) ([]*runtimeapi.Mount, error) {
	var mounts []*runtimeapi.Mount
	hasHosts := false
	envMap := map[string]string{}
	for _, e := range env {
		envMap[e.Key] = string(e.Value)
	}
	for i, vm := range c.VolumeMounts {
		host, ok := paths[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: volume is not set up (missing from spec.volumes or failed)", vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = kuberuntime.ExpandVars(vm.SubPathExpr, func(n string) (string, bool) { v, ok := envMap[n]; return v, ok })
		}
		if sub != "" {
			safe, err := k.volumes.SubPath(pod.UID, vm.Name, c.Name, i, host, sub)
			if err != nil {
				return nil, fmt.Errorf("volumeMount %q: %w", vm.Name, err)
			}
			host = safe
		}
		if vm.MountPath == "/etc/hosts" {
			hasHosts = true
		}
		m := &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly || volumes.ReadOnly(pod, vm.Name)}
		if vm.MountPropagation != nil {
			switch *vm.MountPropagation {
			case v1.MountPropagationHostToContainer:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case v1.MountPropagationBidirectional:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		mounts = append(mounts, m)
	}
	if !pod.Spec.HostNetwork && !hasHosts {
		p, err := k.writeHostsFile(pod, podIPs)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: p})
	}
	return mounts, nil
}

// writeHostsFile writes <pod dir>/etc-hosts: localhost entries, the pod's IPs with its hostname (and
// FQDN when it has a subdomain), and spec.hostAliases.
func (k *Kubelet) writeHostsFile(pod *v1.Pod, podIPs []string) (string, error) {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	host := pod.Name
	if pod.Spec.Hostname != "" {
		host = pod.Spec.Hostname
	}
	for _, ip := range podIPs {
		if pod.Spec.Subdomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", ip, host, pod.Spec.Subdomain, pod.Namespace, k.cfg.ClusterDomain, host)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, host)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	dir := k.volumes.PodDir(pod.UID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "etc-hosts")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return p, os.Rename(tmp, p)
}
