// Package bootstraptoken holds kube-controller-manager's two bootstrap token controllers:
//
//   - tokencleaner (Cleaner) deletes bootstrap token Secrets (type bootstrap.kubernetes.io/token in
//     kube-system) once their expiration has passed, so an expired join token leaves nothing behind;
//   - bootstrapsigner (Signer) signs the kubeconfig of the ConfigMap kube-public/cluster-info with every
//     valid token marked usage-bootstrap-signing, as key jws-kubeconfig-<token id> (a detached JWS,
//     RFC 7515 appendix F, HS256 keyed by the token secret), so a joining node can check that the
//     server it discovered knows its token (kubeadm's token discovery).
package bootstraptoken

import (
	"context"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecret "k8s.io/cluster-bootstrap/util/secrets"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// Cleaner deletes expired bootstrap token Secrets. It watches only kube-system Secrets of the
// bootstrap token type (its own informer, as upstream's tokencleaner), and queues each token again
// when it is due to expire.
type Cleaner struct {
	client   kubernetes.Interface
	informer cache.SharedIndexInformer
	lister   corelisters.SecretNamespaceLister
	*workloop.Loop
}

// NewCleaner returns the token cleaner; Run starts its informer.
func NewCleaner(client kubernetes.Interface, resync time.Duration, log *slog.Logger) (*Cleaner, error) {
	inf := tokenInformer(client, resync)
	c := &Cleaner{client: client, informer: inf, lister: corelisters.NewSecretLister(inf.GetIndexer()).Secrets(metav1.NamespaceSystem)}
	c.Loop = workloop.New("bootstraptoken-cleaner", c.reconcile, log)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: c.Enqueue, UpdateFunc: func(_, o any) { c.Enqueue(o) }}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run runs the informer and the workers until ctx is done.
func (c *Cleaner) Run(ctx context.Context, workers int) {
	go c.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return
	}
	c.Loop.Run(ctx, workers)
}

// tokenInformer watches the bootstrap token Secrets in kube-system only.
func tokenInformer(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	return coreinformers.NewFilteredSecretInformer(client, metav1.NamespaceSystem, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("type", string(bootstrapapi.SecretTypeBootstrapToken)).String()
		})
}

func (c *Cleaner) reconcile(ctx context.Context, key string) error {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	s, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.DeletionTimestamp != nil || s.Type != bootstrapapi.SecretTypeBootstrapToken {
		return nil
	}
	left, expired := bootstrapsecret.GetExpiration(s, time.Now())
	if !expired {
		if left > 0 {
			c.AddAfter(key, left)
		}
		return nil
	}
	err = c.client.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(s.UID))})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return err
	}
	c.Log().Info("deleted expired bootstrap token", "secret", s.Namespace+"/"+s.Name, "expiration", bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenExpirationKey))
	return nil
}
