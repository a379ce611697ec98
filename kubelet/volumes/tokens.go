package volumes

import (
	"context"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// maxTokenAge is how long a token is reused at most, whatever its expiry (upstream's token manager
// refreshes tokens older than 24 h as well).
const maxTokenAge = 24 * time.Hour

// tokenKey names one projected token: the pod it is bound to, its service account and its request.
type tokenKey struct {
	pod        types.UID
	namespace  string
	account    string
	audience   string
	expiration int64
}

type cachedToken struct {
	token               string
	issued, expirations time.Time
}

// tokens caches the service account tokens of the pods' projected volumes, as upstream's kubelet token
// manager: a pod sync reuses its token until 80% of the token's lifetime has passed (or it is 24 h old)
// instead of a TokenRequest per sync, which the API server answers by signing a new JWT each time.
type tokens struct {
	client kubernetes.Interface
	now    func() time.Time

	mu    sync.Mutex
	cache map[tokenKey]cachedToken
}

func newTokens(client kubernetes.Interface) *tokens {
	return &tokens{client: client, now: time.Now, cache: map[tokenKey]cachedToken{}}
}

// get returns the cached token for k while it is fresh, else requests one with req and caches it.
func (t *tokens) get(ctx context.Context, k tokenKey, req *authv1.TokenRequest) (string, error) {
	now := t.now()
	t.mu.Lock()
	c, ok := t.cache[k]
	t.mu.Unlock()
	if ok && !c.needsRefresh(now) {
		return c.token, nil
	}
	tr, err := t.client.CoreV1().ServiceAccounts(k.namespace).CreateToken(ctx, k.account, req, metav1.CreateOptions{})
	if err != nil {
		if ok && now.Before(c.expirations) {
			return c.token, nil // still valid: keep serving it and retry at the next sync
		}
		return "", err
	}
	c = cachedToken{token: tr.Status.Token, issued: now, expirations: tr.Status.ExpirationTimestamp.Time}
	if c.expirations.IsZero() {
		c.expirations = now.Add(time.Duration(k.expiration) * time.Second)
	}
	t.mu.Lock()
	t.cache[k] = c
	t.mu.Unlock()
	return c.token, nil
}

// needsRefresh: 80% of the lifetime passed, or older than maxTokenAge.
func (c cachedToken) needsRefresh(now time.Time) bool {
	life := c.expirations.Sub(c.issued)
	return now.After(c.issued.Add(life*8/10)) || now.Sub(c.issued) > maxTokenAge
}

// forget drops the tokens of pod uid (its volumes are torn down).
func (t *tokens) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.cache {
		if k.pod == uid {
			delete(t.cache, k)
		}
	}
}
