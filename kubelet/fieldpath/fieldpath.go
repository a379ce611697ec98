// Package fieldpath resolves the downward API's selectors against a pod: fieldRef paths
// (metadata.name, metadata.labels['k'], status.podIP, ...) and resourceFieldRef (limits.cpu,
// requests.memory, ...), with the formats the Kubernetes "Downward API" documentation gives.
package fieldpath

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FormatMap renders labels or annotations as the downward API does: sorted `key="value"` lines, the
// values quoted with Go escaping.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%s", k, strconv.Quote(m[k]))
	}
	return b.String()
}

// Extract returns the value of a fieldRef fieldPath for pod. Supported: metadata.name, .namespace,
// .uid, .labels, .annotations, .labels['k'], .annotations['k'], spec.nodeName,
// spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP, status.podIPs (comma-joined).
// Other paths are an error naming the path.
func Extract(pod *v1.Pod, path string) (string, error) {
	if sub, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[sub], nil
	}
	if sub, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[sub], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		var ips []string
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	return "", fmt.Errorf("fieldRef: unsupported fieldPath %q", path)
}

// subscript parses `<prefix>['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// Resource returns the value of a resourceFieldRef for container c (limits.cpu, limits.memory,
// limits.ephemeral-storage, requests.*), divided by divisor (default 1) and rounded up, as the
// downward API does. A missing limit reads as nodeAllocatable's value for that resource (0 when unknown).
func Resource(c *v1.Container, ref *v1.ResourceFieldSelector, nodeAllocatable v1.ResourceList) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, found := list[v1.ResourceName(name)]
	if !found {
		q = nodeAllocatable[v1.ResourceName(name)]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// Container returns the pod's container (app or init) with the given name, or nil; resourceFieldRef
// selectors name their container this way.
func Container(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
