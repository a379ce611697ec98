// Package serviceaccount is the ServiceAccounts controller: every active namespace gets a ServiceAccount
// named "default", recreated if deleted (kube-controller-manager's serviceaccount-controller). Token
// minting is the API server's job (TokenRequest), not this controller's.
package serviceaccount

import (
	"context"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/nsutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// DefaultName is the ServiceAccount every namespace gets.
const DefaultName = "default"

// Controller ensures the default ServiceAccount in each namespace. Queue keys are namespace names.
type Controller struct {
	client   kubernetes.Interface
	nsLister corelisters.NamespaceLister
	saLister corelisters.ServiceAccountLister
	*workloop.Loop
}

// New registers the controller's handlers on factory's namespace and serviceaccount informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client:   client,
		nsLister: factory.Core().V1().Namespaces().Lister(),
		saLister: factory.Core().V1().ServiceAccounts().Lister(),
	}
	c.Loop = workloop.New("serviceaccount", c.reconcile, log)
	if _, err := factory.Core().V1().Namespaces().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().ServiceAccounts().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if sa, ok := obj.(*v1.ServiceAccount); ok && sa.Name == DefaultName {
				c.Add(sa.Namespace)
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) reconcile(ctx context.Context, nsName string) error {
	if _, active, err := nsutil.Active(c.nsLister, nsName); !active {
		return err
	}
	if _, err := c.saLister.ServiceAccounts(nsName).Get(DefaultName); err == nil {
		return nil
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: nsName}}
	_, err := c.client.CoreV1().ServiceAccounts(nsName).Create(ctx, sa, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.Log().Info("created default service account", "namespace", nsName)
		return nil
	case apierrors.IsAlreadyExists(err) || nsutil.Gone(err):
		// Already there (the informer has not seen it yet), or the namespace is going away.
		return nil
	default:
		return fmt.Errorf("create default service account in %s: %w", nsName, err)
	}
}
