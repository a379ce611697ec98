package scheme

import (
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPodLogOptionsParams decodes kubectl logs' query parameters as kube-apiserver does: integers that do not
// parse are refused with the parameter's name (never silently dropped), booleans follow upstream's lenient rule.
func TestPodLogOptionsParams(t *testing.T) {
	decode := func(raw string) (*corev1.PodLogOptions, error) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatal(err)
		}
		o := &corev1.PodLogOptions{}
		return o, ParameterCodec.DecodeParameters(q, corev1.SchemeGroupVersion, o)
	}
	o, err := decode("container=c&tailLines=5&limitBytes=100&sinceSeconds=7&follow=&previous=false&timestamps=1")
	if err != nil {
		t.Fatal(err)
	}
	if o.Container != "c" || o.TailLines == nil || *o.TailLines != 5 || *o.LimitBytes != 100 || *o.SinceSeconds != 7 {
		t.Fatalf("decoded %+v", o)
	}
	if !o.Follow || o.Previous || !o.Timestamps {
		t.Fatalf("booleans: follow=%v previous=%v timestamps=%v, want true false true", o.Follow, o.Previous, o.Timestamps)
	}
	if o, err := decode("container=c"); err != nil || o.TailLines != nil || o.Follow {
		t.Fatalf("absent parameters: %+v, %v", o, err)
	}
	for _, bad := range []string{"tailLines=ten", "limitBytes=1.5", "sinceSeconds=9999999999999999999999"} {
		_, err := decode(bad)
		if err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("%s: got %v, want an error naming the parameter", bad, err)
		}
	}
}
