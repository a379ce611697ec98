// Package serviceaccount is serviceaccounts/token, Kubernetes' TokenRequest API: a short-lived token for
// a service account, optionally bound to a pod, as kubelets request for projected token volumes.
package serviceaccount

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/satoken"
)

// Token lifetimes: the default and the minimum Kubernetes accepts.
const (
	DefaultExpirationSeconds = 3600
	MinExpirationSeconds     = 600
)

// TokenREST creates tokens.
type TokenREST struct {
	serviceAccounts, pods, nodes rest.Getter
	issuer                       *satoken.Issuer
}

// NewTokenREST returns serviceaccounts/token over the service account, pod and node endpoints.
func NewTokenREST(serviceAccounts, pods, nodes rest.Getter, issuer *satoken.Issuer) *TokenREST {
	return &TokenREST{serviceAccounts: serviceAccounts, pods: pods, nodes: nodes, issuer: issuer}
}

var _ rest.NamedCreater = &TokenREST{}

// New returns an empty TokenRequest.
func (r *TokenREST) New() runtime.Object { return &authenticationv1.TokenRequest{} }

// Destroy is a no-op.
func (r *TokenREST) Destroy() {}

// GroupVersionKind says the subresource speaks authentication.k8s.io/v1 TokenRequest.
func (r *TokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
}

// Create issues a token for service account name: 404 if it does not exist, 422 for an expiration under
// ten minutes or a bound object other than an existing Pod (with matching uid when given).
func (r *TokenREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*authenticationv1.TokenRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenRequest: %T", obj))
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopy()); err != nil {
			return nil, err
		}
	}
	saObj, err := r.serviceAccounts.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sa := saObj.(*corev1.ServiceAccount)
	invalid := func(path *field.Path, v any, msg string) error {
		return apierrors.NewInvalid(authenticationv1.SchemeGroupVersion.WithKind("TokenRequest").GroupKind(), name,
			field.ErrorList{field.Invalid(path, v, msg)})
	}
	exp := int64(DefaultExpirationSeconds)
	if req.Spec.ExpirationSeconds != nil {
		exp = *req.Spec.ExpirationSeconds
	}
	if exp < MinExpirationSeconds {
		return nil, invalid(field.NewPath("spec", "expirationSeconds"), exp, "may not specify a duration less than 10 minutes")
	}
	var bound *satoken.BoundObject
	if b := req.Spec.BoundObjectRef; b != nil {
		p := field.NewPath("spec", "boundObjectRef")
		if b.Kind != "Pod" {
			return nil, invalid(p.Child("kind"), b.Kind, "only Pod is supported")
		}
		podObj, err := r.pods.Get(ctx, b.Name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		pod := podObj.(*corev1.Pod)
		if b.UID != "" && b.UID != pod.UID {
			return nil, invalid(p.Child("uid"), b.UID, fmt.Sprintf("pod %s has uid %s", pod.Name, pod.UID))
		}
		bound = &satoken.BoundObject{Name: pod.Name, UID: pod.UID, NodeName: pod.Spec.NodeName}
		// The pod's node goes into the token too, as upstream's: by name only when it is not found.
		if pod.Spec.NodeName != "" {
			nodeObj, err := r.nodes.Get(ctx, pod.Spec.NodeName, &metav1.GetOptions{})
			switch {
			case err == nil:
				bound.NodeUID = nodeObj.(*corev1.Node).UID
			case !apierrors.IsNotFound(err):
				return nil, apierrors.NewInternalError(err)
			}
		}
	}
	tok, expiry, err := r.issuer.Issue(sa.Namespace, sa.Name, sa.UID, bound, req.Spec.Audiences, time.Duration(exp)*time.Second)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := req.DeepCopy()
	out.Name, out.Namespace = sa.Name, sa.Namespace
	out.Spec.ExpirationSeconds = &exp
	if len(out.Spec.Audiences) == 0 {
		out.Spec.Audiences = r.issuer.APIAudiences
	}
	out.Status = authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(expiry)}
	return out, nil
}
