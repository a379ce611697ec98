// Package satoken issues and verifies service account tokens: ES256 JWTs signed with the control plane's
// service account key (<pki>/sa.key), carrying the claims Kubernetes' TokenRequest API defines (iss, sub
// system:serviceaccount:<ns>:<name>, aud, exp, iat, nbf, a random jti and the kubernetes.io claim naming
// the namespace, the service account, the pod the token is bound to and that pod's node). Verified
// tokens authenticate as the service account: user system:serviceaccount:<ns>:<name>, groups
// system:serviceaccounts and system:serviceaccounts:<ns>, and upstream's extra items:
// authentication.kubernetes.io/credential-id "JTI=<jti>", and for a pod-bound token pod-name,
// pod-uid, node-name and node-uid.
package satoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	k8sjwt "k8s.io/apiserver/pkg/authentication/token/jwt"
)

// DefaultIssuer is the iss claim and the default audience, as kube-apiserver's default.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Issuer signs and verifies tokens.
type Issuer struct {
	key *ecdsa.PrivateKey
	// Issuer is the iss claim; APIAudiences are the audiences this API server accepts.
	Issuer       string
	APIAudiences []string
	// Live reads the objects a token names, so that a token outlives neither its service account nor
	// its bound pod (nil: tokens are checked by signature and claims only).
	Live *Objects
}

// Objects reads service accounts and pods from storage (bypassing authorization); a missing object is
// a NotFound error.
type Objects struct {
	ServiceAccount func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	Pod            func(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// DeletionGrace is how long a token stays valid after its service account or bound pod got a deletion
// timestamp (upstream's 60 s, so a terminating pod's containers may still talk to the API server).
const DeletionGrace = 60 * time.Second

// ErrInvalidated is the error of a well-signed token whose service account or bound pod is gone,
// deleted, or was recreated under the same name (another UID).
var ErrInvalidated = errors.New("token has been invalidated")

// BoundObject is the pod a token is bound to (optional), and the node it is scheduled to (NodeName
// empty: none; NodeUID empty: the node was not found), embedded as upstream's node claim.
type BoundObject struct {
	Name     string
	UID      types.UID
	NodeName string
	NodeUID  types.UID
}

type kubernetesClaim struct {
	Namespace      string `json:"namespace"`
	ServiceAccount ref    `json:"serviceaccount"`
	Pod            *ref   `json:"pod,omitempty"`
	Node           *ref   `json:"node,omitempty"`
}

type ref struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

type claims struct {
	jwt.RegisteredClaims
	Kubernetes kubernetesClaim `json:"kubernetes.io"`
}

// LoadOrCreate loads <dir>/sa.key or creates it (ECDSA P-256, mode 0600).
func LoadOrCreate(dir string) (*Issuer, error) {
	path := filepath.Join(dir, "sa.key")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key, gerr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if gerr != nil {
			return nil, gerr
		}
		der, _ := x509.MarshalECPrivateKey(key)
		data = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("satoken: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("satoken: %w", err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("satoken: %s is not PEM", path)
	}
	key, err := x509.ParseECPrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("satoken: %s: %w", path, err)
	}
	return &Issuer{key: key, Issuer: DefaultIssuer, APIAudiences: []string{DefaultIssuer}}, nil
}

// Issue returns a token for service account namespace/name (uid) valid for ttl, for audiences (default:
// the API audiences), bound to pod when pod is not nil, and its expiry.
func (i *Issuer) Issue(namespace, name string, uid types.UID, pod *BoundObject, audiences []string, ttl time.Duration) (string, time.Time, error) {
	if len(audiences) == 0 {
		audiences = i.APIAudiences
	}
	now := time.Now()
	exp := now.Add(ttl)
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: i.Issuer, Subject: serviceaccount.MakeUsername(namespace, name), Audience: audiences,
			ExpiresAt: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now),
			ID: uuid.NewString(),
		},
		Kubernetes: kubernetesClaim{Namespace: namespace, ServiceAccount: ref{Name: name, UID: uid}},
	}
	if pod != nil {
		c.Kubernetes.Pod = &ref{Name: pod.Name, UID: pod.UID}
		if pod.NodeName != "" {
			c.Kubernetes.Node = &ref{Name: pod.NodeName, UID: pod.NodeUID}
		}
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	t.Header["kid"] = i.KeyID()
	tok, err := t.SignedString(i.key)
	return tok, exp, err
}

// AuthenticateToken implements authenticator.Token: a valid, unexpired token for one of the API
// audiences authenticates as its service account, as long as (with Live) that service account and the
// pod the token is bound to exist with the UIDs the token names and are not being deleted for more than
// DeletionGrace (as upstream's bound-token validation); such a token whose objects are gone fails with
// an error wrapping ErrInvalidated (401). Any other token is not this authenticator's.
func (i *Issuer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return &i.key.PublicKey, nil },
		jwt.WithValidMethods([]string{"ES256"}), jwt.WithIssuer(i.Issuer), jwt.WithExpirationRequired())
	if err != nil {
		return nil, false, nil
	}
	if !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(i.APIAudiences, a) }) {
		return nil, false, nil
	}
	ns, name := c.Kubernetes.Namespace, c.Kubernetes.ServiceAccount.Name
	if !serviceaccount.MatchesUsername(ns, name, c.Subject) {
		return nil, false, nil
	}
	if i.Live != nil {
		if err := i.Live.validate(ctx, c.Kubernetes); err != nil {
			return nil, false, err
		}
	}
	info := serviceaccount.ServiceAccountInfo{Namespace: ns, Name: name, UID: string(c.Kubernetes.ServiceAccount.UID)}
	if c.ID != "" {
		info.CredentialID = k8sjwt.CredentialIDForJTI(c.ID)
	}
	if p := c.Kubernetes.Pod; p != nil {
		info.PodName, info.PodUID = p.Name, string(p.UID)
	}
	if n := c.Kubernetes.Node; n != nil {
		info.NodeName, info.NodeUID = n.Name, string(n.UID)
	}
	return &authenticator.Response{Audiences: authenticator.Audiences(c.Audience), User: info.UserInfo()}, true, nil
}

// validate checks the service account and the bound pod of claim k against storage.
func (o *Objects) validate(ctx context.Context, k kubernetesClaim) error {
	cutoff := time.Now().Add(-DeletionGrace)
	check := func(kind, name string, uid, want types.UID, deleted *metav1.Time, err error) error {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: %s %s/%s not found", ErrInvalidated, kind, k.Namespace, name)
		}
		if err != nil {
			return fmt.Errorf("satoken: look up %s %s/%s: %w", kind, k.Namespace, name, err)
		}
		if want != "" && uid != want {
			return fmt.Errorf("%w: %s %s/%s has uid %s, the token names %s", ErrInvalidated, kind, k.Namespace, name, uid, want)
		}
		if deleted != nil && deleted.Time.Before(cutoff) {
			return fmt.Errorf("%w: %s %s/%s was deleted", ErrInvalidated, kind, k.Namespace, name)
		}
		return nil
	}
	sa, err := o.ServiceAccount(ctx, k.Namespace, k.ServiceAccount.Name)
	var uid types.UID
	var deleted *metav1.Time
	if err == nil {
		uid, deleted = sa.UID, sa.DeletionTimestamp
	}
	if err := check("serviceaccount", k.ServiceAccount.Name, uid, k.ServiceAccount.UID, deleted, err); err != nil {
		return err
	}
	if k.Pod == nil {
		return nil
	}
	pod, err := o.Pod(ctx, k.Namespace, k.Pod.Name)
	uid, deleted = "", nil
	if err == nil {
		uid, deleted = pod.UID, pod.DeletionTimestamp
	}
	return check("pod", k.Pod.Name, uid, k.Pod.UID, deleted, err)
}
