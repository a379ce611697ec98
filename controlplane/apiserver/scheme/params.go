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
		for k, p := range map[string]**int64{"sinceSeconds": &o.SinceSeconds, "tailLines": &o.TailLines, "limitBytes": &o.LimitBytes} {
			n, err := intParam(q, k)
			if err != nil {
				return err
			}
			*p = n
		}
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
	// the proxy subresources' one parameter: the request's subpath, set by the connect handler as "path"
	for _, c := range []struct {
		opts    any
		setPath func(any, string)
	}{
		{(*corev1.NodeProxyOptions)(nil), func(o any, p string) { o.(*corev1.NodeProxyOptions).Path = p }},
		{(*corev1.PodProxyOptions)(nil), func(o any, p string) { o.(*corev1.PodProxyOptions).Path = p }},
		{(*corev1.ServiceProxyOptions)(nil), func(o any, p string) { o.(*corev1.ServiceProxyOptions).Path = p }},
	} {
		if err := s.AddConversionFunc((*url.Values)(nil), c.opts, func(a, b any, _ conversion.Scope) error {
			c.setPath(b, a.(*url.Values).Get("path"))
			return nil
		}); err != nil {
			return err
		}
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

// boolParam reads a boolean parameter as upstream's generated conversions do
// (runtime.Convert_Slice_string_To_bool): absent, "false" and "0" are false, any other value is true.
func boolParam(q url.Values, k string) bool {
	var b bool
	_ = runtime.Convert_Slice_string_To_bool(ptr(q[k]), &b, nil) // never fails
	return b
}

// intParam reads an integer parameter; absent is nil, and a value that is not an int64 is an error naming
// the parameter (the request is refused with 400, as kube-apiserver's conversion refuses it).
func intParam(q url.Values, k string) (*int64, error) {
	v, ok := q[k]
	if !ok || len(v) == 0 || v[0] == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not an integer", k, v[0])
	}
	return &n, nil
}

func ptr[T any](v T) *T { return &v }
