// Package authentication is authentication.k8s.io/v1 TokenReview and SelfSubjectReview, create-only as in
// kube-apiserver: a TokenReview asks the API server's authenticator who a bearer token belongs to (what a
// kubelet in webhook mode does with tokens presented to it); a SelfSubjectReview returns who the caller
// is (`kubectl auth whoami`). Nothing is stored.
package authentication

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// NewStorage returns "tokenreviews" over the request authenticator (the API server's own) and
// "selfsubjectreviews". apiAudiences are the audiences a review without spec.audiences checks.
func NewStorage(auth authenticator.Request, apiAudiences []string) map[string]rest.Storage {
	return map[string]rest.Storage{
		"tokenreviews":       &TokenReviewREST{auth: auth, audiences: apiAudiences},
		"selfsubjectreviews": &SelfSubjectReviewREST{},
	}
}

// TokenReviewREST creates TokenReviews.
type TokenReviewREST struct {
	auth      authenticator.Request
	audiences []string
}

var (
	_ rest.Creater              = &TokenReviewREST{}
	_ rest.Scoper               = &TokenReviewREST{}
	_ rest.SingularNameProvider = &TokenReviewREST{}
)

// New returns an empty TokenReview.
func (r *TokenReviewREST) New() runtime.Object { return &authenticationv1.TokenReview{} }

// Destroy is a no-op.
func (r *TokenReviewREST) Destroy() {}

// NamespaceScoped is false.
func (r *TokenReviewREST) NamespaceScoped() bool { return false }

// GetSingularName is "tokenreview".
func (r *TokenReviewREST) GetSingularName() string { return "tokenreview" }

// Create authenticates spec.token as a bearer token for spec.audiences (default: the API server's):
// 400 without a token; status.authenticated with the user, or false with status.error. A token valid
// for none of the audiences asked is not authenticated.
func (r *TokenReviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	tr, ok := obj.(*authenticationv1.TokenReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenReview: %T", obj))
	}
	if tr.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	auds := tr.Spec.Audiences
	if len(auds) == 0 {
		auds = r.audiences
	}
	req := &http.Request{Header: http.Header{"Authorization": {"Bearer " + tr.Spec.Token}}}
	rctx := context.Background()
	if len(auds) > 0 {
		rctx = authenticator.WithAudiences(rctx, auds)
	}
	resp, ok, err := r.auth.AuthenticateRequest(req.WithContext(rctx))
	tr.Status = authenticationv1.TokenReviewStatus{Authenticated: ok}
	if err != nil {
		tr.Status.Error = err.Error()
	}
	if !ok || resp == nil || resp.User == nil {
		tr.Status.Authenticated = false
		return tr, nil
	}
	if len(auds) > 0 && len(resp.Audiences) > 0 && len(authenticator.Audiences(auds).Intersect(resp.Audiences)) == 0 {
		tr.Status = authenticationv1.TokenReviewStatus{Error: errors.New("token audiences do not match the requested audiences").Error()}
		return tr, nil
	}
	tr.Status.User = userInfo(resp.User)
	tr.Status.Audiences = resp.Audiences
	return tr, nil
}

func userInfo(u user.Info) authenticationv1.UserInfo {
	out := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		out.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range extra {
			out.Extra[k] = v
		}
	}
	return out
}

// SelfSubjectReviewREST creates SelfSubjectReviews.
type SelfSubjectReviewREST struct{}

var (
	_ rest.Creater              = &SelfSubjectReviewREST{}
	_ rest.Scoper               = &SelfSubjectReviewREST{}
	_ rest.SingularNameProvider = &SelfSubjectReviewREST{}
)

// New returns an empty SelfSubjectReview.
func (r *SelfSubjectReviewREST) New() runtime.Object { return &authenticationv1.SelfSubjectReview{} }

// Destroy is a no-op.
func (r *SelfSubjectReviewREST) Destroy() {}

// NamespaceScoped is false.
func (r *SelfSubjectReviewREST) NamespaceScoped() bool { return false }

// GetSingularName is "selfsubjectreview".
func (r *SelfSubjectReviewREST) GetSingularName() string { return "selfsubjectreview" }

// Create returns the requesting user's name, uid, groups and extra in status.userInfo.
func (r *SelfSubjectReviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	ssr, ok := obj.(*authenticationv1.SelfSubjectReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectReview: %T", obj))
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	ssr.Status.UserInfo = userInfo(u)
	return ssr, nil
}
