package fieldpath

import (
	"maps"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzExtract feeds arbitrary downward API fieldPaths (user input in a pod spec) to Extract. Properties:
// it never panics; an unsupported path is an error quoting the path; metadata.labels['k'] and
// metadata.annotations['k'] return exactly the value stored under k; and FormatMap's output parses back
// (line by line, key="quoted") to the map.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{"metadata.name", "metadata.labels", "metadata.labels['app']", "metadata.annotations['a.b/c']",
		"metadata.labels['']", "metadata.labels[']", "metadata.labels['x']']", "status.podIPs", "spec.nodeName", "metadata.", "", "metadata.labels['\n']"} {
		f.Add(s, "app", "v\"al\nue")
	}
	f.Fuzz(func(t *testing.T, path, key, value string) {
		labels := map[string]string{"app": "web"}
		labels[key] = value
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns",
			Labels: labels, Annotations: map[string]string{key: value}}}
		got, err := Extract(pod, path)
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(path)) {
			t.Fatalf("error %q does not quote the path %q", err, path)
		}
		if err == nil && path == "metadata.name" && got != "p" {
			t.Fatalf("metadata.name = %q", got)
		}
		for _, m := range []string{"labels", "annotations"} {
			got, err := Extract(pod, "metadata."+m+"['"+key+"']")
			if err != nil || got != value {
				t.Fatalf("metadata.%s[%q] = %q, %v; want %q", m, key, got, err, value)
			}
		}
		formatted, err := Extract(pod, "metadata.labels")
		if err != nil {
			t.Fatal(err)
		}
		back := map[string]string{}
		// Keys are label keys (no newline, no '='), as the API server's validation guarantees.
		if strings.ContainsAny(key, "\n=") {
			return
		}
		for _, line := range strings.Split(formatted, "\n") {
			k, q, ok := strings.Cut(line, "=")
			v, err := strconv.Unquote(q)
			if !ok || err != nil {
				t.Fatalf("line %q of %q does not parse: %v", line, formatted, err)
			}
			back[k] = v
		}
		if !maps.Equal(back, pod.Labels) {
			t.Fatalf("FormatMap(%v) = %q parses back to %v", pod.Labels, formatted, back)
		}
	})
}
