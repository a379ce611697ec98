package scheme

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// addParamConversions registers the query-parameter decoders of the pods/log, pods/exec, pods/attach,
// pods/portforward and nodes/proxy options (the parameters kubectl logs, exec, attach and port-forward
// send, the proxied subpath), which k8s.io/api does
// not generate.
func addParamConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodLogOptions)(nil), func(a, b any, _ conversion.Scope) error {
		q, o := *a.(*url.Values), b.(*corev1.PodLogOptions)
		o.Container = q.Get("container")
		o.Follow = boolParam(q, "follow")
		o.Previous = boolParam(q, "previous")
		o.Timestamps = boolParam(q, "timestamps")
		o.InsecureSkipTLSVerifyBackend = boolParam(q, "insecureSkipTLSVerifyBackend")
		o.SinceSeconds = intParam(q, "sinceSeconds")
		o.TailLines = intParam(q, "tailLines")
		o.LimitBytes = intParam(q, "limitBytes")
		if v := q.Get("sinceTime"); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return err
			}
			o.SinceTime = &metav1.Time{Time: t}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.NodeProxyOptions)(nil), func(a, b any, _ conversion.Scope) error {
		b.(*corev1.NodeProxyOptions).Path = a.(*url.Values).Get("path")
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodAttachOptions)(nil), func(a, b any, _ conversion.Scope) error {
		q, o := *a.(*url.Values), b.(*corev1.PodAttachOptions)
		o.Container = q.Get("container")
		o.Stdin, o.Stdout, o.Stderr, o.TTY = streamParams(q)
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodPortForwardOptions)(nil), func(a, b any, _ conversion.Scope) error {
		o := b.(*corev1.PodPortForwardOptions)
		// repeated or comma-separated, as upstream's conversion; the range is checked by pods/portforward
		for _, v := range (*a.(*url.Values))["ports"] {
			for _, f := range strings.Split(v, ",") {
				n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
				if err != nil {
					return fmt.Errorf("ports: %q is not a port number", f)
				}
				o.Ports = append(o.Ports, int32(n))
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*url.Values)(nil), (*corev1.PodExecOptions)(nil), func(a, b any, _ conversion.Scope) error {
		q, o := *a.(*url.Values), b.(*corev1.PodExecOptions)
		o.Container = q.Get("container")
		o.Command = q["command"]
		o.Stdin, o.Stdout, o.Stderr, o.TTY = streamParams(q)
		return nil
	})
}

// streamParams are the stdin, stdout, stderr and tty parameters of exec and attach.
func streamParams(q url.Values) (stdin, stdout, stderr, tty bool) {
	return boolParam(q, "stdin"), boolParam(q, "stdout"), boolParam(q, "stderr"), boolParam(q, "tty")
}

func boolParam(q url.Values, k string) bool {
	b, _ := strconv.ParseBool(q.Get(k))
	return b
}

func intParam(q url.Values, k string) *int64 {
	v := q.Get(k)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}
