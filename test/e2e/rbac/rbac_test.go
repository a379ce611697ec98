// Package rbac_test drives access control end to end against a real etcd and API server: RBAC roles
// and bindings for a ServiceAccount and a certificate user, escalation prevention, ClusterRole
// aggregation by the controller manager (under its own identity), the review APIs (SubjectAccessReview
// and friends, TokenReview, SelfSubjectReview), `kubectl auth can-i` / `whoami`, and the bootstrap
// policy's reconciliation across a restart. One server serves every subtest.
package rbac_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit/controlplane/controllers"
	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

const ns = "team"

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// must(v, err)(t) fails t on err and returns v.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func withToken(s *fw.Server, tok string) *kubernetes.Clientset {
	cfg := rest.AnonymousClientConfig(s.Config)
	cfg.BearerToken = tok
	return kubernetes.NewForConfigOrDie(cfg)
}

func anonymous(s *fw.Server) *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(s.Config))
}

func saToken(t *testing.T, s *fw.Server, name string) string {
	t.Helper()
	ctx := ctxT(t)
	must(s.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))(t)
	exp := int64(3600)
	tr := must(s.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{}))(t)
	return tr.Status.Token
}

// eventually polls cond every 100 ms until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestAccessControl(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	must(s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))(t)
	reader := saToken(t, s, "reader")
	other := saToken(t, s, "other")
	must(s.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{}))(t)
	must(s.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader"}}}, metav1.CreateOptions{}))(t)

	t.Run("ServiceAccountRole", func(t *testing.T) {
		c := withToken(s, reader)
		// the authorizer's informers see the binding moments after it is written
		eventually(t, 10*time.Second, "reader lists pods", func() error {
			_, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err
		})
		_, err := c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:serviceaccount:team:reader" cannot list resource "secrets"`) {
			t.Fatalf("reader lists secrets: want 403 naming the user and resource, got %v", err)
		}
		if _, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("reader lists pods in another namespace: want 403, got %v", err)
		}
		if _, err := withToken(s, other).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("a service account the role is not bound to lists pods: want 403, got %v", err)
		}
		for _, tc := range []struct {
			resource string
			want     bool
		}{{"pods", true}, {"secrets", false}} {
			r := must(c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: tc.resource}}}, metav1.CreateOptions{}))(t)
			if r.Status.Allowed != tc.want {
				t.Errorf("SelfSubjectAccessReview list %s: allowed=%v, want %v (%+v)", tc.resource, r.Status.Allowed, tc.want, r.Status)
			}
			if tc.want && !strings.Contains(r.Status.Reason, `RoleBinding "team/reader" of Role "pod-reader"`) {
				t.Errorf("allowed review's reason %q does not name the binding", r.Status.Reason)
			}
		}
		rr := must(c.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{}))(t)
		if !slices.ContainsFunc(rr.Status.ResourceRules, func(r authorizationv1.ResourceRule) bool {
			return slices.Equal(r.Resources, []string{"pods"}) && slices.Equal(r.Verbs, []string{"get", "list"})
		}) {
			t.Errorf("SelfSubjectRulesReview lacks the pod-reader rule: %+v", rr.Status.ResourceRules)
		}
		who := must(c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}))(t)
		if who.Status.UserInfo.Username != "system:serviceaccount:team:reader" || !slices.Contains(who.Status.UserInfo.Groups, "system:serviceaccounts:team") {
			t.Errorf("SelfSubjectReview: %+v", who.Status.UserInfo)
		}
		kubectlAgrees(t, s, reader)
	})

	t.Run("Reviews", func(t *testing.T) {
		// an administrator asks about the reader
		sar := func(c kubernetes.Interface, resource string) (*authorizationv1.SubjectAccessReview, error) {
			return c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: "system:serviceaccount:team:reader", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: resource, Name: "x"}}}, metav1.CreateOptions{})
		}
		if r := must(sar(s.Client, "pods"))(t); !r.Status.Allowed {
			t.Errorf("SAR get pods for reader: %+v", r.Status)
		}
		if r := must(sar(s.Client, "secrets"))(t); r.Status.Allowed {
			t.Errorf("SAR get secrets for reader: allowed")
		}
		// nobody but those RBAC allows may ask about others or review tokens
		for name, c := range map[string]kubernetes.Interface{"anonymous": anonymous(s), "service account": withToken(s, reader)} {
			if _, err := sar(c, "pods"); !apierrors.IsForbidden(err) {
				t.Errorf("%s creates a SubjectAccessReview: want 403, got %v", name, err)
			}
			if _, err := c.AuthorizationV1().LocalSubjectAccessReviews(ns).Create(ctx, &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
				Spec: authorizationv1.SubjectAccessReviewSpec{User: "x", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods"}}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s creates a LocalSubjectAccessReview: want 403, got %v", name, err)
			}
			if _, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: reader}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s creates a TokenReview: want 403, got %v", name, err)
			}
		}
		if _, err := anonymous(s).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("anonymous SelfSubjectAccessReview: want 403 (system:basic-user is for authenticated users), got %v", err)
		}
		// malformed reviews are 422
		if _, err := s.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "x"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
			!strings.Contains(err.Error(), "exactly one of nonResourceAttributes or resourceAttributes") {
			t.Errorf("SAR without attributes: want 422, got %v", err)
		}
		if _, err := s.Client.AuthorizationV1().LocalSubjectAccessReviews(ns).Create(ctx, &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "x", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Resource: "pods"}}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
			!strings.Contains(err.Error(), "spec.resourceAttributes.namespace") {
			t.Errorf("LSAR for another namespace: want 422 naming spec.resourceAttributes.namespace, got %v", err)
		}
		// TokenReview by an administrator
		tr := must(s.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: reader}}, metav1.CreateOptions{}))(t)
		if !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:team:reader" {
			t.Errorf("TokenReview of the reader's token: %+v", tr.Status)
		}
		tr = must(s.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: reader[:len(reader)-4] + "AAAA"}}, metav1.CreateOptions{}))(t)
		if tr.Status.Authenticated || tr.Status.Error == "" {
			t.Errorf("TokenReview of a tampered token: %+v", tr.Status)
		}
		// the node rules let a kubelet review tokens and access for its own API
		node := s.NodeClient(t, "node-a")
		if _, err := node.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: reader}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("node TokenReview: %v", err)
		}
		// anonymous users keep what the bootstrap policy gives them
		if _, err := anonymous(s).Discovery().RESTClient().Get().AbsPath("/healthz").DoRaw(ctx); err != nil {
			t.Errorf("anonymous /healthz: %v", err)
		}
		if _, err := anonymous(s).CoreV1().ConfigMaps("kube-public").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("anonymous lists kube-public configmaps: want 403, got %v", err)
		}
	})

	t.Run("Escalation", func(t *testing.T) {
		must(s.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "role-maker"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}}}}, metav1.CreateOptions{}))(t)
		must(s.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "eve"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "role-maker"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "eve"}}}, metav1.CreateOptions{}))(t)
		eve := kubernetes.NewForConfigOrDie(s.UserConfig(t, "eve"))
		secretsRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}}
		var err error
		eventually(t, 10*time.Second, "eve's create is authorized (then refused as an escalation)", func() error {
			_, err = eve.RbacV1().Roles(ns).Create(ctx, secretsRole, metav1.CreateOptions{})
			if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "is attempting to grant RBAC permissions not currently held") {
				return nil
			}
			return errString("got " + errText(err))
		})
		if !strings.Contains(err.Error(), `user "eve"`) || !strings.Contains(err.Error(), `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`) {
			t.Errorf("escalation message should name the user and the missing rule: %v", err)
		}
		// a role within what eve holds is fine
		must(eve.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "sub-maker"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}}}}, metav1.CreateOptions{}))(t)
		// binding a role eve does not hold is refused; with bind it is allowed
		readerBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mallory-reader"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "mallory"}}}
		if _, err := eve.RbacV1().RoleBindings(ns).Create(ctx, readerBinding, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
			!strings.Contains(err.Error(), `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`) {
			t.Errorf("eve binds pod-reader: want 403 naming the missing rule, got %v", err)
		}
		role := must(s.Client.RbacV1().Roles(ns).Get(ctx, "role-maker", metav1.GetOptions{}))(t)
		role.Rules = append(role.Rules, rbacv1.PolicyRule{Verbs: []string{"escalate"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}},
			rbacv1.PolicyRule{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}, ResourceNames: []string{"pod-reader"}})
		must(s.Client.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{}))(t)
		eventually(t, 10*time.Second, "eve with escalate creates secret-reader", func() error {
			_, err := eve.RbacV1().Roles(ns).Create(ctx, secretsRole, metav1.CreateOptions{})
			return err
		})
		eventually(t, 10*time.Second, "eve with bind binds pod-reader", func() error {
			_, err := eve.RbacV1().RoleBindings(ns).Create(ctx, readerBinding, metav1.CreateOptions{})
			return err
		})
	})

	t.Run("Validation", func(t *testing.T) {
		for _, tc := range []struct {
			name, field string
			create      func() error
		}{
			{"role without verbs", "rules[0].verbs", func() error {
				_, err := s.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
					Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
				return err
			}},
			{"role with a non-resource URL", "rules[0].nonResourceURLs", func() error {
				_, err := s.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
					Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}, metav1.CreateOptions{})
				return err
			}},
			{"clusterrolebinding to a Role", "roleRef.kind", func() error {
				_, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "x"}}, metav1.CreateOptions{})
				return err
			}},
			{"service account subject without namespace", "subjects[0].namespace", func() error {
				_, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "x"}}}, metav1.CreateOptions{})
				return err
			}},
			{"changed roleRef", "roleRef", func() error {
				b := must(s.Client.RbacV1().RoleBindings(ns).Get(ctx, "reader", metav1.GetOptions{}))(t)
				b.RoleRef.Name = "role-maker"
				_, err := s.Client.RbacV1().RoleBindings(ns).Update(ctx, b, metav1.UpdateOptions{})
				return err
			}},
		} {
			if err := tc.create(); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s: want 422 naming %s, got %v", tc.name, tc.field, err)
			}
		}
	})

	t.Run("Aggregation", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- controllers.Run(cctx, s.ControllerManagerClient(t), controllers.Options{Controllers: []string{controllers.ClusterRoleAggregation}})
		}()
		t.Cleanup(func() { cancel(); <-done })
		// the bootstrap view role is filled from system:aggregate-to-view
		eventually(t, 30*time.Second, "view aggregated", func() error {
			v, err := s.Client.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(v.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "pods/log") }) {
				return errString("view has no pods/log rule yet")
			}
			return nil
		})
		must(s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"example.com/aggregate-to-monitoring": "true"}}}}}, metav1.CreateOptions{}))(t)
		must(s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-endpoints",
			Labels: map[string]string{"example.com/aggregate-to-monitoring": "true"}},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"endpoints"}}}}, metav1.CreateOptions{}))(t)
		must(s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-unlabelled"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{}))(t)
		eventually(t, 30*time.Second, "monitoring aggregated", func() error {
			m, err := s.Client.RbacV1().ClusterRoles().Get(ctx, "monitoring", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(m.Rules) != 1 || !slices.Equal(m.Rules[0].Resources, []string{"endpoints"}) {
				return errString("monitoring rules: " + ruleText(m.Rules))
			}
			return nil
		})
		// an aggregated ClusterRole grants full authority: only those who hold it may create one
		eve := kubernetes.NewForConfigOrDie(s.UserConfig(t, "eve"))
		if _, err := eve.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "eve-agg"},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("eve creates an aggregated ClusterRole: want 403, got %v", err)
		}
	})

	t.Run("BootstrapReconciliation", func(t *testing.T) {
		if err := s.Client.RbacV1().ClusterRoles().Delete(ctx, "view", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		disc := must(s.Client.RbacV1().ClusterRoles().Get(ctx, "system:discovery", metav1.GetOptions{}))(t)
		disc.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}
		must(s.Client.RbacV1().ClusterRoles().Update(ctx, disc, metav1.UpdateOptions{}))(t)
		s.Restart(t)
		v := must(s.Client.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{}))(t)
		if v.AggregationRule == nil || v.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" {
			t.Errorf("view was not recreated as bootstrapped: %+v", v)
		}
		disc = must(s.Client.RbacV1().ClusterRoles().Get(ctx, "system:discovery", metav1.GetOptions{}))(t)
		if !slices.ContainsFunc(disc.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.NonResourceURLs, "/apis/*") }) {
			t.Errorf("system:discovery did not get its rules back: %s", ruleText(disc.Rules))
		}
		// the reader's grant survived the restart
		if _, err := withToken(s, reader).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("reader after restart: %v", err)
		}
	})
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func ruleText(rules []rbacv1.PolicyRule) string {
	var s []string
	for _, r := range rules {
		s = append(s, r.String())
	}
	return strings.Join(s, "; ")
}

// kubectlAgrees runs `kubectl auth can-i` and `kubectl auth whoami` with the token, when kubectl is
// installed.
func kubectlAgrees(t *testing.T, s *fw.Server, token string) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not installed: can-i not checked")
		return
	}
	run := func(args ...string) (string, error) {
		base := []string{"--server", s.URL, "--certificate-authority", s.DataDir + "/pki/ca.crt", "--token", token, "--kubeconfig", "/dev/null"}
		out, err := exec.Command(kubectl, append(base, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := run("auth", "can-i", "list", "pods", "-n", ns); out != "yes" || err != nil {
		t.Errorf("kubectl auth can-i list pods: %q %v", out, err)
	}
	if out, _ := run("auth", "can-i", "list", "secrets", "-n", ns); out != "no" {
		t.Errorf("kubectl auth can-i list secrets: %q, want no", out)
	}
	if out, err := run("auth", "whoami"); err != nil || !strings.Contains(out, "system:serviceaccount:team:reader") {
		t.Errorf("kubectl auth whoami: %q %v", out, err)
	}
}
