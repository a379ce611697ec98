package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// FuzzDecode feeds arbitrary YAML/JSON to Decode, the parser of the --config file. Properties: it never
// panics; an accepted configuration passes Validate, its ignored list is sorted and holds no supported
// field, and, re-encoded as YAML, it decodes again to the same configuration.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 10251\nmaxPods: 50\ncgroupDriver: systemd\nsyncFrequency: 30s\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nregisterWithTaints:\n- key: a\n  value: b\n  effect: NoSchedule\nevictionHard:\n  memory.available: 100Mi\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 0\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 1\nport: 2\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnoSuchField: 1\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: -1s\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/x\nclusterDNS: [10.96.0.10]\n",
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":1e30}`,
		"kind: Pod\n", "- a\n- b\n", "&a [*a]\n", "{", "", "null", "apiVersion: [x]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, ignored, err := Decode(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if err := Validate(cfg); err != nil {
			t.Fatalf("accepted configuration fails Validate: %v", err)
		}
		if !slices.IsSorted(ignored) {
			t.Fatalf("ignored %v is not sorted", ignored)
		}
		for _, f := range ignored {
			if slices.Contains(Supported, f) {
				t.Fatalf("supported field %q reported as ignored", f)
			}
		}
		again, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		cfg2, _, err := Decode(again)
		if err != nil {
			t.Fatalf("accepted configuration does not decode again: %v\n%s", err, again)
		}
		if !apiequality.Semantic.DeepEqual(cfg, cfg2) {
			t.Fatalf("decode(encode(decode(x))) differs:\n%s", again)
		}
	})
}

// FuzzParseTaints checks the --register-with-taints parser: never panics, errors quote an entry, and an
// accepted list formatted back as key[=value]:Effect parses to the same taints.
func FuzzParseTaints(f *testing.F) {
	for _, s := range []string{"a=b:NoSchedule", "a:NoExecute,b=c:PreferNoSchedule", "example.com/x=y:NoSchedule", "a=b", ":NoSchedule", "a=b:Bogus", ",,", "a=b=c:NoSchedule", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		taints, err := ParseTaints(spec)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "taint ") {
				t.Fatalf("error %q does not name the entry", err)
			}
			return
		}
		var parts []string
		for _, tn := range taints {
			s := tn.Key
			if tn.Value != "" {
				s += "=" + tn.Value
			}
			parts = append(parts, s+":"+string(tn.Effect))
		}
		again, err := ParseTaints(strings.Join(parts, ","))
		if err != nil || !reflect.DeepEqual(again, taints) {
			t.Fatalf("round trip of %q: %v, %v vs %v", spec, err, again, taints)
		}
	})
}

// FuzzParseLabels checks the --node-labels parser: never panics, errors quote an entry, and an accepted
// map formatted back as key=value pairs parses to the same map.
func FuzzParseLabels(f *testing.F) {
	for _, s := range []string{"a=b", "a=b,c=d", "node-role.kubernetes.io/worker=", "kubernetes.io/hostname=x", "example.k8s.io/x=y", "a", "=b", "a=b c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		labels, err := ParseLabels(spec)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "label ") {
				t.Fatalf("error %q does not name the entry", err)
			}
			return
		}
		var parts []string
		for k, v := range labels {
			parts = append(parts, k+"="+v)
		}
		again, err := ParseLabels(strings.Join(parts, ","))
		if err != nil || !reflect.DeepEqual(again, labels) {
			t.Fatalf("round trip of %q: %v, %v vs %v", spec, err, again, labels)
		}
	})
}
