package pod

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// streamREST is what pods/exec, pods/attach and pods/portforward share: a connect subresource (GET for
// WebSocket clients, POST for SPDY, as kube-apiserver) proxied to the pod's kubelet over an upgraded
// connection.
//
// As kube-apiserver 1.37 does for a kubelet that does not declare ExtendWebSocketsToKubelet, the API
// server itself speaks the WebSocket protocols kubectl 1.30+ tries first and SPDY towards the kubelet:
// exec and attach over WebSocket v5.channel.k8s.io are translated to SPDY streams
// (k8s.io/apiserver's StreamTranslatorHandler), port-forward's SPDY-over-WebSocket tunnel
// (SPDY/3.1+portforward.k8s.io) is unwrapped into an SPDY upgrade (its TunnelingHandler); every other
// upgrade goes through apimachinery's UpgradeAwareHandler unchanged.
//
// A GET upgrade is authorized for "get" by the filter chain and, like kube-apiserver's
// AuthorizePodWebsocketUpgradeCreatePermission, for "create" here as well, so RBAC's "create" on the
// subresource is what grants a stream whatever the method.
type streamREST struct {
	store    *store.REST
	kubelets KubeletConnection
	authz    authorizer.Authorizer
}

// Destroy is a no-op.
func (r *streamREST) Destroy() {}

// ConnectMethods are GET (WebSocket) and POST (SPDY), as kube-apiserver.
func (r *streamREST) ConnectMethods() []string { return []string{"GET", "POST"} }

// authorizeCreate asks the authorizer whether the request's user may "create" the request's
// subresource; a POST was already authorized so by the filter chain. Errors are 403 Forbidden naming the
// user's missing permission, or 500 when the request carries no request info.
func (r *streamREST) authorizeCreate(ctx context.Context) error {
	info, ok := genericrequest.RequestInfoFrom(ctx)
	if !ok {
		return apierrors.NewInternalError(errors.New("no request info in context"))
	}
	if info.Verb == "create" {
		return nil
	}
	attrs, err := filters.GetAuthorizerAttributes(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("authorizer attributes: %w", err))
	}
	d, reason, err := r.authz.Authorize(ctx, createVerb{attrs})
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if d != authorizer.DecisionAllow {
		u := attrs.GetUser()
		msg := fmt.Sprintf("User %q cannot create resource %q in API group %q in the namespace %q", u.GetName(),
			info.Resource+"/"+info.Subresource, info.APIGroup, info.Namespace)
		if reason != "" {
			msg += ": " + reason
		}
		return apierrors.NewForbidden(corev1.Resource(info.Resource+"/"+info.Subresource), info.Name, errors.New(msg))
	}
	return nil
}

// createVerb is the request's authorizer attributes with the verb "create".
type createVerb struct{ authorizer.Attributes }

func (createVerb) GetVerb() string { return "create" }

// streams checks that at least one of stdin, stdout and stderr is asked for and returns the kubelet
// query upstream's API server sends for them: input, output, error and tty, each "1".
func streams(name, what string, stdin, stdout, stderr, tty bool) (url.Values, error) {
	if !stdin && !stdout && !stderr {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s: %s needs at least one of stdin, stdout or stderr", name, what))
	}
	q := url.Values{}
	for k, v := range map[string]bool{corev1.ExecStdinParam: stdin, corev1.ExecStdoutParam: stdout, corev1.ExecStderrParam: stderr, corev1.ExecTTYParam: tty} {
		if v {
			q.Set(k, "1")
		}
	}
	return q, nil
}

// connectCommand is Connect of pods/exec (with command) and pods/attach (without): it authorizes the
// request for "create", checks the options, and proxies to the kubelet's /<what>/<ns>/<pod>/<container>,
// translating WebSocket v5 requests to SPDY.
func (r *streamREST) connectCommand(ctx context.Context, name, what, container string, command []string, o translator.Options, responder rest.Responder) (http.Handler, error) {
	if err := r.authorizeCreate(ctx); err != nil {
		return nil, err
	}
	if what == "exec" && len(command) == 0 {
		return nil, apierrors.NewBadRequest("you must specify at least 1 command")
	}
	q, err := streams(name, what, o.Stdin, o.Stdout, o.Stderr, o.Tty)
	if err != nil {
		return nil, err
	}
	u, rt, err := kubeletURL(ctx, r.store, r.kubelets, name, container, what)
	if err != nil {
		return nil, err
	}
	if len(command) > 0 {
		q[corev1.ExecCommandParam] = command
	}
	u.RawQuery = q.Encode()
	upgrade := proxy.NewUpgradeAwareHandler(u, rt, false, true, proxy.NewErrorResponder(responder))
	return translator.NewTranslatingHandler(upgrade, translator.NewStreamTranslatorHandler(u, rt, 0, o),
		wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
}

// ExecREST is pods/exec: a command run in a container, streamed through the kubelet's /exec.
type ExecREST struct{ streamREST }

// New returns an empty PodExecOptions: as kube-apiserver, the kind of pods/exec is its options, which admission
// (CONNECT webhooks and policies) receives as the request's object.
func (r *ExecREST) New() runtime.Object { return &corev1.PodExecOptions{} }

var _ rest.Connecter = &ExecREST{}

// NewConnectOptions returns PodExecOptions.
func (r *ExecREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodExecOptions{}, false, ""
}

// Connect proxies the upgrade to the kubelet's /exec/<ns>/<pod>/<container>?command=...&output=1...
// Errors (400): no command, no stream, a container the pod does not have, a pod with no node.
func (r *ExecREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.PodExecOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	return r.connectCommand(ctx, name, "exec", o.Container, o.Command, translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}, responder)
}

// AttachREST is pods/attach: the streams of a container's main process, through the kubelet's /attach.
type AttachREST struct{ streamREST }

// New returns an empty PodAttachOptions: as kube-apiserver, the kind of pods/attach is its options, which admission
// (CONNECT webhooks and policies) receives as the request's object.
func (r *AttachREST) New() runtime.Object { return &corev1.PodAttachOptions{} }

var _ rest.Connecter = &AttachREST{}

// NewConnectOptions returns PodAttachOptions.
func (r *AttachREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodAttachOptions{}, false, ""
}

// Connect proxies the upgrade to the kubelet's /attach/<ns>/<pod>/<container>?input=1&output=1...
// Errors (400): no stream, a container the pod does not have, a pod with no node.
func (r *AttachREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.PodAttachOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	return r.connectCommand(ctx, name, "attach", o.Container, nil, translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}, responder)
}

// PortForwardREST is pods/portforward: connections to the pod's ports, through the kubelet's
// /portForward (SPDY, portforward.k8s.io; the ports a client opens travel in its stream headers).
type PortForwardREST struct{ streamREST }

// New returns an empty PodPortForwardOptions: as kube-apiserver, the kind of pods/portforward is its options, which admission
// (CONNECT webhooks and policies) receives as the request's object.
func (r *PortForwardREST) New() runtime.Object { return &corev1.PodPortForwardOptions{} }

var _ rest.Connecter = &PortForwardREST{}

// NewConnectOptions returns PodPortForwardOptions.
func (r *PortForwardREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodPortForwardOptions{}, false, ""
}

// Connect proxies the upgrade to the kubelet's /portForward/<ns>/<pod>[?port=p1,p2], unwrapping the
// SPDY-over-WebSocket tunnel kubectl 1.30+ opens. Errors (400): a port outside 1-65535, a pod with no
// node.
func (r *PortForwardREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	if err := r.authorizeCreate(ctx); err != nil {
		return nil, err
	}
	o, ok := opts.(*corev1.PodPortForwardOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	ports := make([]string, 0, len(o.Ports))
	for _, p := range o.Ports {
		if p < 1 || p > 65535 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s: ports: %d is not a valid port number (1-65535)", name, p))
		}
		ports = append(ports, strconv.Itoa(int(p)))
	}
	u, rt, err := kubeletPodURL(ctx, r.store, r.kubelets, name, "portForward")
	if err != nil {
		return nil, err
	}
	if len(ports) > 0 {
		u.RawQuery = url.Values{corev1.PortHeader: {strings.Join(ports, ",")}}.Encode()
	}
	upgrade := proxy.NewUpgradeAwareHandler(u, rt, false, true, proxy.NewErrorResponder(responder))
	return translator.NewTranslatingHandler(upgrade, translator.NewTunnelingHandler(upgrade), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
}
