// Package jointoken manages node join tokens the way `kubeadm token` does: each token "<id>.<secret>"
// is a Secret kube-system/bootstrap-token-<id> of type bootstrap.kubernetes.io/token (the format the API
// server's bootstrap token authenticator and the token cleaner read), created, listed and deleted
// through the API. It also composes the agent's join command from the cluster-info ConfigMap: the
// server URL and the CA pin (certutil.CAHash) that the agent checks before it sends the token.
package jointoken

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutilk8s "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstrapsecret "k8s.io/cluster-bootstrap/util/secrets"

	"github.com/nodekit/nodekit/internal/certutil"
)

// DefaultGroup is the extra group new tokens put their users in, as kubeadm's
// system:bootstrappers:kubeadm:default-node-token.
const DefaultGroup = "system:bootstrappers:nodekit:default-node-token"

// Options describe a token to create.
type Options struct {
	// Token is "<id>.<secret>" ([a-z0-9]{6}.[a-z0-9]{16}); empty generates a random one.
	Token string
	// TTL is how long the token is valid; 0 means it never expires.
	TTL time.Duration
	// Description is free text shown by List.
	Description string
	// Usages are among "signing" and "authentication" (default both).
	Usages []string
	// Groups are extra groups, each system:bootstrappers:<...> (default [DefaultGroup]).
	Groups []string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Secret returns the bootstrap token Secret for o, or an error naming the bad option.
func Secret(o Options) (*corev1.Secret, error) {
	tok := o.Token
	if tok == "" {
		var err error
		if tok, err = bootstraputil.GenerateBootstrapToken(); err != nil {
			return nil, fmt.Errorf("token: %w", err)
		}
	}
	if !bootstraputil.IsValidBootstrapToken(tok) { // the error never echoes the secret
		id, _, _ := strings.Cut(tok, ".")
		return nil, fmt.Errorf("token (id %q, %d characters): want <6 characters>.<16 characters> of [a-z0-9]", id, len(tok))
	}
	if o.TTL < 0 {
		return nil, fmt.Errorf("ttl %s: must not be negative (0 means never expires)", o.TTL)
	}
	usages := o.Usages
	if len(usages) == 0 {
		usages = bootstrapapi.KnownTokenUsages
	}
	if err := bootstraputil.ValidateUsages(usages); err != nil {
		return nil, fmt.Errorf("usages: %w", err)
	}
	groups := o.Groups
	if len(groups) == 0 {
		groups = []string{DefaultGroup}
	}
	for _, g := range groups {
		if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
			return nil, fmt.Errorf("groups: %w", err)
		}
	}
	id, secret, _ := strings.Cut(tok, ".")
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:          []byte(id),
		bootstrapapi.BootstrapTokenSecretKey:      []byte(secret),
		bootstrapapi.BootstrapTokenExtraGroupsKey: []byte(strings.Join(groups, ",")),
	}
	if o.Description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(o.Description)
	}
	if o.TTL > 0 {
		now := time.Now
		if o.Now != nil {
			now = o.Now
		}
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(now().Add(o.TTL).UTC().Format(time.RFC3339))
	}
	for _, u := range usages {
		data[bootstrapapi.BootstrapTokenUsagePrefix+u] = []byte("true")
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(id), Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data:       data,
	}, nil
}

// Create stores a new token Secret and returns the token.
func Create(ctx context.Context, c kubernetes.Interface, o Options) (string, error) {
	s, err := Secret(o)
	if err != nil {
		return "", err
	}
	if _, err := c.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return bootstraputil.TokenFromIDAndSecret(string(s.Data[bootstrapapi.BootstrapTokenIDKey]), string(s.Data[bootstrapapi.BootstrapTokenSecretKey])), nil
}

// Token is one stored token as List reports it.
type Token struct {
	Token       string
	Expires     *time.Time // nil: never
	Usages      []string
	Description string
	Groups      []string
}

// List returns the tokens stored in kube-system, sorted by token; Secrets that are not valid tokens are
// skipped.
func List(ctx context.Context, c kubernetes.Interface) ([]Token, error) {
	l, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("type", string(bootstrapapi.SecretTypeBootstrapToken)).String()})
	if err != nil {
		return nil, fmt.Errorf("list bootstrap token secrets: %w", err)
	}
	var out []Token
	for i := range l.Items {
		s := &l.Items[i]
		id, secret := bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenIDKey), bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenSecretKey)
		tok := bootstraputil.TokenFromIDAndSecret(id, secret)
		if !bootstraputil.IsValidBootstrapToken(tok) || s.Name != bootstraputil.BootstrapTokenSecretName(id) {
			continue
		}
		t := Token{Token: tok, Description: bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenDescriptionKey)}
		if e := bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenExpirationKey); e != "" {
			if exp, err := time.Parse(time.RFC3339, e); err == nil {
				t.Expires = &exp
			}
		}
		for _, u := range bootstrapapi.KnownTokenUsages {
			if bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenUsagePrefix+u) == "true" {
				t.Usages = append(t.Usages, u)
			}
		}
		if g := bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenExtraGroupsKey); g != "" {
			t.Groups = strings.Split(g, ",")
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Token) int { return strings.Compare(a.Token, b.Token) })
	return out, nil
}

// WriteTable writes toks as `kubeadm token list` does: a header, then one line per token with its TTL
// left at now (<forever> when it never expires, <invalid> once expired), its expiry (RFC 3339, UTC),
// usages, description (<none> when empty) and extra groups, in aligned columns.
func WriteTable(w io.Writer, toks []Token, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "TOKEN\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS")
	for _, t := range toks {
		ttl, expires := "<forever>", "<never>"
		if t.Expires != nil {
			expires = t.Expires.UTC().Format(time.RFC3339)
			ttl = "<invalid>"
			if left := t.Expires.Sub(now); left > 0 {
				ttl = duration.ShortHumanDuration(left)
			}
		}
		desc := t.Description
		if desc == "" {
			desc = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Token, ttl, expires, strings.Join(t.Usages, ","), desc, strings.Join(t.Groups, ","))
	}
	return tw.Flush()
}

// Delete removes the token with this id (or full token) and returns its id.
func Delete(ctx context.Context, c kubernetes.Interface, idOrToken string) (string, error) {
	id, err := tokenID(idOrToken)
	if err != nil {
		return "", err
	}
	name := bootstraputil.BootstrapTokenSecretName(id)
	if err := c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete secret %s/%s: %w", metav1.NamespaceSystem, name, err)
	}
	return id, nil
}

// tokenID returns the id of a token id or whole token "<id>.<secret>", or an error quoting the id part
// only (never the secret).
func tokenID(idOrToken string) (string, error) {
	id, _, _ := strings.Cut(idOrToken, ".")
	if !bootstraputil.IsValidBootstrapTokenID(id) {
		return "", fmt.Errorf("token id %q: want 6 characters of [a-z0-9] (or the whole token)", id)
	}
	return id, nil
}

// Discovery is what an agent needs besides the token: the server URL and the CA pin.
type Discovery struct {
	Server string
	CAHash string
}

// ClusterInfo reads kube-public/cluster-info (written by the API server at start) and returns its
// server URL and the hash of its CA certificate.
func ClusterInfo(ctx context.Context, c kubernetes.Interface) (Discovery, error) {
	cm, err := c.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return Discovery{}, fmt.Errorf("get configmap %s/%s: %w", metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, err)
	}
	cfg, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
	if err != nil {
		return Discovery{}, fmt.Errorf("cluster-info %s: %w", bootstrapapi.KubeConfigKey, err)
	}
	for _, cl := range cfg.Clusters {
		certs, err := certutilk8s.ParseCertsPEM(cl.CertificateAuthorityData)
		if err != nil {
			return Discovery{}, fmt.Errorf("cluster-info certificate-authority-data: %w", err)
		}
		return Discovery{Server: cl.Server, CAHash: certutil.CAHash(certs[0])}, nil
	}
	return Discovery{}, fmt.Errorf("cluster-info %s has no cluster", bootstrapapi.KubeConfigKey)
}

// JoinCommand is the agent command line that joins a node with token.
func (d Discovery) JoinCommand(token string) string {
	return fmt.Sprintf("nodekit agent --server %s --token %s --ca-hash %s", d.Server, token, d.CAHash)
}
