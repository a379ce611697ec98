package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestResourceQuota runs ResourceQuota end to end on the real API server, etcd and controller
// manager: the controller reports status.hard and status.used; admission (k8s.io/apiserver's
// ResourceQuota plugin with nodekit's evaluators) refuses the pod over pods=2 with upstream's
// message, a pod without the cpu request a requests.cpu quota needs, a ConfigMap or Job over its
// count/ quota, a pod whose RuntimeClass overhead takes it over requests.cpu (the overhead is charged),
// and pods over BestEffort- and Terminating-scoped quotas (other pods pass them); deleting a pod, or its turning Succeeded, frees quota; bad specs are 422 naming the
// field; anonymous users and a ServiceAccount without RBAC are 403.
func TestResourceQuota(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	const ns = "quota"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quotas := c.Client.CoreV1().ResourceQuotas(ns)
	pods := c.Client.CoreV1().Pods(ns)
	q := func(name string, hard v1.ResourceList) *v1.ResourceQuota {
		return &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ResourceQuotaSpec{Hard: hard}}
	}
	usedIs := func(name string, want v1.ResourceList) func() error {
		return func() error {
			got, err := quotas.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !quotav1.Equals(got.Status.Hard, got.Spec.Hard) {
				return fmt.Errorf("status.hard %v, spec.hard %v", got.Status.Hard, got.Spec.Hard)
			}
			if !quotav1.Equals(got.Status.Used, want) {
				return fmt.Errorf("status.used %v, want %v", got.Status.Used, want)
			}
			return nil
		}
	}
	pod := func(name, cpu string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		}
		return p
	}
	forbidden := func(err error, msg string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("want 403 with %q, got %v", msg, err)
		}
	}
	rl := func(kv ...string) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}

	t.Run("compute", func(t *testing.T) {
		if _, err := quotas.Create(ctx, q("compute", rl("pods", "2", "requests.cpu", "1")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "compute quota status", usedIs("compute", rl("pods", "0", "requests.cpu", "0")))
		_, err := pods.Create(ctx, pod("no-request", ""), metav1.CreateOptions{})
		forbidden(err, "failed quota: compute: must specify requests.cpu for: c")
		for _, name := range []string{"p1", "p2"} {
			if _, err := pods.Create(ctx, pod(name, "400m"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = pods.Create(ctx, pod("p3", "100m"), metav1.CreateOptions{})
		forbidden(err, `pods "p3" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=2, limited: pods=2`)
		eventually(t, 30*time.Second, "two pods used", usedIs("compute", rl("pods", "2", "requests.cpu", "800m")))

		zero := int64(0)
		if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "deleted pod's quota freed", usedIs("compute", rl("pods", "1", "requests.cpu", "400m")))
		if _, err := pods.Create(ctx, pod("p3", "100m"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("third pod after a deletion: %v", err)
		}
		_, err = pods.Create(ctx, pod("p4", "700m"), metav1.CreateOptions{})
		forbidden(err, "exceeded quota: compute, requested: pods=1,requests.cpu=700m, used: pods=2,requests.cpu=500m, limited: pods=2,requests.cpu=1")

		// a terminal pod uses no compute quota
		p2, err := pods.Get(ctx, "p2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p2.Status.Phase = v1.PodSucceeded
		if _, err := pods.UpdateStatus(ctx, p2, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "succeeded pod's quota freed", usedIs("compute", rl("pods", "1", "requests.cpu", "100m")))

		// A RuntimeClass's overhead.podFixed (the pod's spec.overhead) is charged with the requests, at
		// admission and in status.used (PodOverhead): 800m fits, 800m+250m does not.
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "quota-overhead"}, Handler: "runc",
			Overhead: &nodev1.Overhead{PodFixed: rl("cpu", "250m")}}
		if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.NodeV1().RuntimeClasses().Delete(context.Background(), rc.Name, metav1.DeleteOptions{})
		})
		withOverhead := func(name, cpu string) *v1.Pod {
			p := pod(name, cpu)
			p.Spec.RuntimeClassName = &rc.Name
			return p
		}
		_, err = pods.Create(ctx, withOverhead("p5", "800m"), metav1.CreateOptions{})
		forbidden(err, "exceeded quota: compute, requested: requests.cpu=1050m, used: requests.cpu=100m, limited: requests.cpu=1")
		if _, err := pods.Create(ctx, withOverhead("p5", "200m"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "overhead in status.used", usedIs("compute", rl("pods", "2", "requests.cpu", "550m")))
		if err := pods.Delete(ctx, "p5", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "overhead pod's quota freed", usedIs("compute", rl("pods", "1", "requests.cpu", "100m")))
	})

	t.Run("counts", func(t *testing.T) {
		// the namespace already holds kube-root-ca.crt, published by the controller manager
		eventually(t, 30*time.Second, "kube-root-ca.crt", func() error {
			_, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err
		})
		if _, err := quotas.Create(ctx, q("objects", rl("count/configmaps", "2", "count/jobs.batch", "1", "resourcequotas", "5")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "objects quota status",
			usedIs("objects", rl("count/configmaps", "1", "count/jobs.batch", "0", "resourcequotas", "2")))
		cm := func(name string) *v1.ConfigMap { return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}} }
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm("one"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm("two"), metav1.CreateOptions{})
		forbidden(err, "exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2")

		suspend := true
		job := func(name string) *batchv1.Job {
			return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{Suspend: &suspend,
				Template: v1.PodTemplateSpec{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}}}
		}
		if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job("j1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = c.Client.BatchV1().Jobs(ns).Create(ctx, job("j2"), metav1.CreateOptions{})
		forbidden(err, "exceeded quota: objects, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1")
		// the controller counts jobs through discovery and a metadata informer: a deletion frees it
		eventually(t, 30*time.Second, "objects counted", usedIs("objects", rl("count/configmaps", "2", "count/jobs.batch", "1", "resourcequotas", "2")))
		if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.BatchV1().Jobs(ns).Delete(ctx, "j1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "deletions freed", usedIs("objects", rl("count/configmaps", "1", "count/jobs.batch", "0", "resourcequotas", "2")))
	})

	t.Run("scopes", func(t *testing.T) {
		const sns = "quota-scopes"
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		squotas, spods := c.Client.CoreV1().ResourceQuotas(sns), c.Client.CoreV1().Pods(sns)
		for name, scope := range map[string]v1.ResourceQuotaScope{"besteffort": v1.ResourceQuotaScopeBestEffort, "terminating": v1.ResourceQuotaScopeTerminating} {
			rq := q(name, rl("pods", "1"))
			rq.Spec.Scopes = []v1.ResourceQuotaScope{scope}
			if _, err := squotas.Create(ctx, rq, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		scopedUsed := func(name, pods string) func() error {
			return func() error {
				got, err := squotas.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if !quotav1.Equals(got.Status.Used, rl("pods", pods)) {
					return fmt.Errorf("%s: status.used %v, want pods=%s", name, got.Status.Used, pods)
				}
				return nil
			}
		}
		eventually(t, 30*time.Second, "scoped quotas computed", func() error {
			if err := scopedUsed("besteffort", "0")(); err != nil {
				return err
			}
			return scopedUsed("terminating", "0")()
		})
		deadline := int64(600)
		terminatingPod := func(name string) *v1.Pod {
			p := pod(name, "100m")
			p.Spec.ActiveDeadlineSeconds = &deadline
			return p
		}
		for _, p := range []*v1.Pod{pod("be1", ""), pod("burstable", "100m"), terminatingPod("t1")} {
			if _, err := spods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
		}
		_, err := spods.Create(ctx, pod("be2", ""), metav1.CreateOptions{})
		forbidden(err, "exceeded quota: besteffort, requested: pods=1, used: pods=1, limited: pods=1")
		_, err = spods.Create(ctx, terminatingPod("t2"), metav1.CreateOptions{})
		forbidden(err, "exceeded quota: terminating, requested: pods=1, used: pods=1, limited: pods=1")
		eventually(t, 30*time.Second, "scoped usage", func() error {
			if err := scopedUsed("besteffort", "1")(); err != nil {
				return err
			}
			return scopedUsed("terminating", "1")()
		})
	})

	t.Run("invalid", func(t *testing.T) {
		for name, tc := range map[string]struct {
			spec  v1.ResourceQuotaSpec
			field string
		}{
			"negative":      {v1.ResourceQuotaSpec{Hard: rl("pods", "-1")}, "spec.hard[pods]"},
			"fractional":    {v1.ResourceQuotaSpec{Hard: rl("services", "1500m")}, "spec.hard[services]"},
			"not-quota":     {v1.ResourceQuotaSpec{Hard: rl("storage", "1Gi")}, "spec.hard[storage]"},
			"uncounted":     {v1.ResourceQuotaSpec{Hard: rl("example.com/widgets", "1")}, "spec.hard[example.com/widgets]"},
			"unknown-scope": {v1.ResourceQuotaSpec{Hard: rl("pods", "1"), Scopes: []v1.ResourceQuotaScope{"Sometimes"}}, "spec.scopes[0]"},
			"vac-scope": {v1.ResourceQuotaSpec{Hard: rl("pods", "1"), ScopeSelector: &v1.ScopeSelector{MatchExpressions: []v1.ScopedResourceSelectorRequirement{
				{ScopeName: v1.ResourceQuotaScopeVolumeAttributesClass, Operator: v1.ScopeSelectorOpExists}}}}, "spec.scopeSelector.matchExpressions[0].scopeName"},
			"scope-resource": {v1.ResourceQuotaSpec{Hard: rl("services", "1"), Scopes: []v1.ResourceQuotaScope{v1.ResourceQuotaScopeTerminating}}, "spec.scopes[0]"},
			"conflicting":    {v1.ResourceQuotaSpec{Hard: rl("pods", "1"), Scopes: []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort, v1.ResourceQuotaScopeNotBestEffort}}, "spec.scopes"},
			"operator": {v1.ResourceQuotaSpec{Hard: rl("pods", "1"), ScopeSelector: &v1.ScopeSelector{MatchExpressions: []v1.ScopedResourceSelectorRequirement{
				{ScopeName: v1.ResourceQuotaScopeBestEffort, Operator: v1.ScopeSelectorOpIn, Values: []string{"x"}}}}}, "spec.scopeSelector.matchExpressions[0].operator"},
		} {
			_, err := quotas.Create(ctx, &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + name}, Spec: tc.spec}, metav1.CreateOptions{})
			var status apierrors.APIStatus
			if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
				t.Errorf("%s: want 422, got %v", name, err)
				continue
			}
			found := false
			for _, cause := range status.Status().Details.Causes {
				found = found || cause.Field == tc.field
			}
			if !found {
				t.Errorf("%s: no cause at %s: %v", name, tc.field, err)
			}
		}
	})

	t.Run("access", func(t *testing.T) {
		if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		exp := int64(600)
		tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		saCfg := rest.AnonymousClientConfig(c.Config)
		saCfg.BearerToken = tok.Status.Token
		for who, cl := range map[string]kubernetes.Interface{
			"anonymous":       kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(c.Config)),
			"service account": kubernetes.NewForConfigOrDie(saCfg),
		} {
			if _, err := cl.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s list: want 403, got %v", who, err)
			}
			if _, err := cl.CoreV1().ResourceQuotas(ns).Create(ctx, q("mine", rl("pods", "100")), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s create: want 403, got %v", who, err)
			}
			if _, err := cl.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q("compute", rl("pods", "100")), metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s update status: want 403, got %v", who, err)
			}
		}
	})
}
