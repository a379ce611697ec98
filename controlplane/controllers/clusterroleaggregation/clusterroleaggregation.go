// Package clusterroleaggregation is the ClusterRole aggregation controller (kube-controller-manager's
// clusterrole-aggregation): a ClusterRole with an aggregationRule gets as its rules the union of the
// rules of every other ClusterRole one of its clusterRoleSelectors matches, in ClusterRole name order,
// each distinct rule once, and is updated whenever a ClusterRole changes. The rules a client writes into
// an aggregated ClusterRole are replaced.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// Controller aggregates ClusterRoles. Queue keys are the names of ClusterRoles with an aggregationRule.
type Controller struct {
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	*workloop.Loop
}

// New registers the controller's handler on factory's ClusterRole informer: any change re-queues every
// aggregated ClusterRole (a label change can move a role in or out of any selector).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{client: client, roles: factory.Rbac().V1().ClusterRoles().Lister()}
	c.Loop = workloop.New("clusterrole-aggregation", c.reconcile, log)
	enqueueAll := func(any) {
		all, err := c.roles.List(labels.Everything())
		if err != nil {
			return
		}
		for _, r := range all {
			if r.AggregationRule != nil {
				c.Add(r.Name)
			}
		}
	}
	if _, err := factory.Rbac().V1().ClusterRoles().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueAll, UpdateFunc: func(_, n any) { enqueueAll(n) }, DeleteFunc: enqueueAll,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) reconcile(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	rules, err := c.aggregate(role)
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(rules, role.Rules) || (len(rules) == 0 && len(role.Rules) == 0) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = rules
	if _, err := c.client.RbacV1().ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update aggregated clusterrole %s: %w", name, err)
	}
	c.Log().Info("aggregated clusterrole", "clusterrole", name, "rules", len(rules))
	return nil
}

// aggregate returns the distinct rules of the ClusterRoles role's selectors match, in name order.
func (c *Controller) aggregate(role *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	matched := map[string]*rbacv1.ClusterRole{}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			// validation refuses bad selectors; one that slipped through aggregates nothing
			c.Log().Warn("clusterrole aggregation selector does not parse", "clusterrole", role.Name, "err", err)
			continue
		}
		found, err := c.roles.List(sel)
		if err != nil {
			return nil, err
		}
		for _, r := range found {
			if r.Name != role.Name {
				matched[r.Name] = r
			}
		}
	}
	names := make([]string, 0, len(matched))
	for n := range matched {
		names = append(names, n)
	}
	sort.Strings(names)
	var rules []rbacv1.PolicyRule
	for _, n := range names {
		for _, r := range matched[n].Rules {
			if !contains(rules, r) {
				rules = append(rules, r)
			}
		}
	}
	return rules, nil
}

func contains(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, x := range rules {
		if apiequality.Semantic.DeepEqual(x, r) {
			return true
		}
	}
	return false
}
