// Package bootstrappolicy is the RBAC policy the API server installs and reconciles at every start: the
// ClusterRoles, ClusterRoleBindings, Roles and RoleBindings Kubernetes' kube-apiserver bootstraps
// (cluster-admin, admin/edit/view aggregated from system:aggregate-to-* and metrics-server's
// system:aggregated-metrics-reader, system:discovery,
// system:basic-user, system:public-info-viewer, system:node-bootstrapper, system:node-proxier,
// system:kube-scheduler, system:kube-controller-manager and the system:controller:* roles of the
// controllers nodekit runs, system:kube-dns, ...) with the same rules, plus what kubeadm adds for
// joining nodes: bootstrap-token users may request node certificates and anonymous users may read the
// kube-public/cluster-info ConfigMap.
//
// Every object carries the label kubernetes.io/bootstrapping=rbac-defaults and the annotation
// rbac.authorization.kubernetes.io/autoupdate=true; reconciliation (Reconcile) re-adds missing rules and
// subjects to objects with that annotation and leaves objects an administrator set to "false" alone.
//
// nodekit's controller manager runs every controller under one identity, the user
// system:kube-controller-manager, instead of one ServiceAccount per controller: each
// system:controller:<name> ClusterRoleBinding names both upstream's ServiceAccount kube-system/<name>
// and that user.
package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/nodekit/nodekit/internal/podnet"
)

// Well-known names.
const (
	// BootstrappersGroup is the group of every bootstrap-token user.
	BootstrappersGroup = "system:bootstrappers"
	// ControllerRolePrefix starts the name of each controller's ClusterRole.
	ControllerRolePrefix = "system:controller:"
	// AggregateToAdmin, AggregateToEdit and AggregateToView are the labels that aggregate a ClusterRole
	// into admin, edit and view.
	AggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

var (
	read       = []string{"get", "list", "watch"}
	write      = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite  = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	readUpdate = []string{"get", "list", "watch", "update", "patch"}
)

// API groups the rules name.
const (
	core             = ""
	apps             = "apps"
	authn            = "authentication.k8s.io"
	authz            = "authorization.k8s.io"
	autoscaling      = "autoscaling"
	batch            = "batch"
	certificates     = "certificates.k8s.io"
	coordination     = "coordination.k8s.io"
	discovery        = "discovery.k8s.io"
	events           = "events.k8s.io"
	extensions       = "extensions"
	networking       = "networking.k8s.io"
	policy           = "policy"
	rbac             = "rbac.authorization.k8s.io"
	storage          = "storage.k8s.io"
	storageMigration = "storagemigration.k8s.io"
	apiextensions    = "apiextensions.k8s.io"
	nodeGroup        = "node.k8s.io"
	metricsGroup     = "metrics.k8s.io"
	customMetrics    = "custom.metrics.k8s.io"
	extMetrics       = "external.metrics.k8s.io"
)

// rule builds a PolicyRule: rule(verbs...).groups(...).res(...) or .urls(...).
type ruleB struct{ r rbacv1.PolicyRule }

func rule(verbs ...string) *ruleB { return &ruleB{r: rbacv1.PolicyRule{Verbs: verbs}} }

func (b *ruleB) groups(g ...string) *ruleB { b.r.APIGroups = g; return b }
func (b *ruleB) names(n ...string) *ruleB  { b.r.ResourceNames = n; return b }
func (b *ruleB) res(r ...string) rbacv1.PolicyRule {
	b.r.Resources = r
	return b.r
}
func (b *ruleB) named(r string, n ...string) rbacv1.PolicyRule {
	b.r.Resources, b.r.ResourceNames = []string{r}, n
	return b.r
}
func (b *ruleB) urls(u ...string) rbacv1.PolicyRule { b.r.NonResourceURLs = u; return b.r }

func eventsRule() rbacv1.PolicyRule {
	return rule("create", "update", "patch").groups(core, events).res("events")
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func aggregated(name, selectorLabel string, labels map[string]string) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{selectorLabel: "true"}}}}}
}

func withLabel(r rbacv1.ClusterRole, key string) rbacv1.ClusterRole { return withLabels(r, key) }

func withLabels(r rbacv1.ClusterRole, keys ...string) rbacv1.ClusterRole {
	r.Labels = map[string]string{}
	for _, k := range keys {
		r.Labels[k] = "true"
	}
	return r
}

// NodeRules are the rules of system:node, which the node rules of package authz also grant.
func NodeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule("create").groups(authn).res("tokenreviews"),
		rule("create").groups(authz).res("subjectaccessreviews", "localsubjectaccessreviews"),
		rule(read...).groups(core).res("services"),
		rule("create", "get", "list", "watch").groups(core).res("nodes"),
		rule("update", "patch").groups(core).res("nodes/status"),
		rule("update", "patch").groups(core).res("nodes"),
		rule("create", "update", "patch").groups(core, events).res("events"),
		rule(read...).groups(core).res("pods"),
		rule("create", "delete").groups(core).res("pods"),
		rule("update", "patch").groups(core).res("pods/status"),
		rule("create").groups(core).res("pods/eviction"),
		rule("get", "list", "watch").groups(core).res("secrets", "configmaps"),
		rule("get").groups(core).res("persistentvolumeclaims", "persistentvolumes"),
		rule("get").groups(core).res("endpoints"),
		rule("create", "get", "list", "watch").groups(certificates).res("certificatesigningrequests"),
		rule("get", "create", "update", "patch", "delete").groups(coordination).res("leases"),
		rule("get").groups(storage).res("volumeattachments"),
		rule("create").groups(core).res("serviceaccounts/token"),
		rule("get", "update", "patch").groups(core).res("persistentvolumeclaims/status"),
		rule("get", "watch", "list").groups(storage).res("csidrivers"),
		rule("get", "create", "update", "patch", "delete").groups(storage).res("csinodes"),
		rule("get", "list", "watch").groups(nodeGroup).res("runtimeclasses"),
	}
}

func viewRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(read...).groups(core).res("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
		rule(read...).groups(core).res("limitranges", "resourcequotas", "bindings", "pods/status", "resourcequotas/status",
			"namespaces/status", "replicationcontrollers/status", "pods/log"),
		rule(read...).groups(core).res("namespaces"),
		rule(read...).groups(core, events).res("events"),
		rule(read...).groups(discovery).res("endpointslices"),
		rule(read...).groups(apps).res("controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
			"daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
			"replicasets", "replicasets/status", "replicasets/scale"),
		rule(read...).groups(autoscaling).res("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
		rule(read...).groups(batch).res("jobs", "cronjobs", "cronjobs/status", "jobs/status"),
		rule(read...).groups(extensions).res("daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
			"ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
			"networkpolicies"),
		rule(read...).groups(policy).res("poddisruptionbudgets", "poddisruptionbudgets/status"),
		rule(read...).groups(networking).res("networkpolicies", "ingresses", "ingresses/status"),
	}
}

func editRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(read...).groups(core).res("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
		rule("impersonate").groups(core).res("serviceaccounts"),
		rule(write...).groups(core).res("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
		rule("create").groups(core).res("pods/eviction"),
		rule(write...).groups(core).res("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets"),
		rule("create").groups(core).res("serviceaccounts/token"),
		rule(write...).groups(core, events).res("events"),
		rule(write...).groups(apps).res("statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
			"deployments/rollback", "replicasets", "replicasets/scale"),
		rule(write...).groups(autoscaling).res("horizontalpodautoscalers"),
		rule(write...).groups(batch).res("jobs", "cronjobs"),
		rule(write...).groups(extensions).res("daemonsets", "deployments", "deployments/scale", "deployments/rollback", "ingresses",
			"replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies"),
		rule(write...).groups(policy).res("poddisruptionbudgets"),
		rule(write...).groups(networking).res("networkpolicies", "ingresses"),
		rule(readWrite...).groups(coordination).res("leases"),
	}
}

// ClusterRoles returns the bootstrap ClusterRoles (controller roles included), labelled and annotated.
func ClusterRoles() []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{
		clusterRole("cluster-admin", rule("*").groups("*").res("*"), rule("*").urls("*")),
		clusterRole("system:discovery", rule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/",
			"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")),
		clusterRole("system:monitoring",
			rule("get").urls("/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*"),
			rule("get").groups(core).res("nodes/metrics")),
		clusterRole("system:basic-user",
			rule("create").groups(authz).res("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule("create").groups(authn).res("selfsubjectreviews")),
		clusterRole("system:public-info-viewer", rule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/")),
		aggregated("admin", AggregateToAdmin, nil),
		aggregated("edit", AggregateToEdit, map[string]string{AggregateToAdmin: "true"}),
		aggregated("view", AggregateToView, map[string]string{AggregateToEdit: "true"}),
		withLabel(clusterRole("system:aggregate-to-admin",
			rule("create").groups(authz).res("localsubjectaccessreviews"),
			rule(readWrite...).groups(rbac).res("roles", "rolebindings")), AggregateToAdmin),
		withLabel(clusterRole("system:aggregate-to-edit", editRules()...), AggregateToEdit),
		withLabel(clusterRole("system:aggregate-to-view", viewRules()...), AggregateToView),
		// metrics-server's own role, so that view, edit and admin users may `kubectl top`
		withLabels(clusterRole("system:aggregated-metrics-reader", rule(read...).groups(metricsGroup).res("pods", "nodes")),
			AggregateToView, AggregateToEdit, AggregateToAdmin),
		clusterRole("system:heapster",
			rule(read...).groups(core).res("events", "pods", "nodes", "namespaces"),
			rule(read...).groups(extensions).res("deployments")),
		clusterRole("system:node", NodeRules()...),
		// nodekit's: every node's route controller reads all Nodes (their podCIDRs and InternalIPs)
		clusterRole(podnet.RouteReaderRole, rule(read...).groups(core).res("nodes")),
		clusterRole("system:node-problem-detector",
			rule("get").groups(core).res("nodes"), rule("patch").groups(core).res("nodes/status"), eventsRule()),
		clusterRole("system:node-bootstrapper",
			rule("create", "get", "list", "watch").groups(certificates).res("certificatesigningrequests")),
		clusterRole("system:auth-delegator",
			rule("create").groups(authn).res("tokenreviews"), rule("create").groups(authz).res("subjectaccessreviews")),
		clusterRole("system:kube-aggregator", rule(read...).groups(core).res("services", "endpoints")),
		clusterRole("system:kube-controller-manager",
			eventsRule(),
			rule("create").groups(coordination).res("leases"),
			rule("get", "update").groups(coordination).named("leases", "kube-controller-manager"),
			rule("create").groups(core).res("secrets", "serviceaccounts"),
			rule("delete").groups(core).res("secrets"),
			rule("get").groups(core).res("namespaces", "secrets", "serviceaccounts", "configmaps"),
			rule("update").groups(core).res("secrets", "serviceaccounts"),
			rule("create").groups(authn).res("tokenreviews"),
			rule("create").groups(authz).res("subjectaccessreviews"),
			rule("list", "watch").groups("*").res("*"),
			rule("create").groups(core).res("serviceaccounts/token")),
		clusterRole("system:kube-dns", rule("list", "watch").groups(core).res("endpoints", "services")),
		clusterRole("system:persistent-volume-provisioner",
			rule("get", "list", "watch", "create", "delete").groups(core).res("persistentvolumes"),
			rule("get", "list", "watch", "update").groups(core).res("persistentvolumeclaims"),
			rule(read...).groups(storage).res("storageclasses"),
			rule("watch").groups(core).res("events"), eventsRule()),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient",
			rule("create").groups(certificates).res("certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
			rule("create").groups(certificates).res("certificatesigningrequests/selfnodeclient")),
		clusterRole("system:volume-scheduler",
			rule(readUpdate...).groups(core).res("persistentvolumes"),
			rule(read...).groups(storage).res("storageclasses"),
			rule(readUpdate...).groups(core).res("persistentvolumeclaims")),
		clusterRole("system:certificates.k8s.io:legacy-unknown-approver",
			rule("approve").groups(certificates).named("signers", "kubernetes.io/legacy-unknown")),
		clusterRole("system:certificates.k8s.io:kubelet-serving-approver",
			rule("approve").groups(certificates).named("signers", "kubernetes.io/kubelet-serving")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-approver",
			rule("approve").groups(certificates).named("signers", "kubernetes.io/kube-apiserver-client")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
			rule("approve").groups(certificates).named("signers", "kubernetes.io/kube-apiserver-client-kubelet")),
		clusterRole("system:service-account-issuer-discovery", rule("get").urls(
			"/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/")),
		clusterRole("system:kubelet-api-admin",
			rule("get", "list", "watch").groups(core).res("nodes"),
			rule("proxy").groups(core).res("nodes"),
			rule("*").groups(core).res("nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log")),
		clusterRole("system:node-proxier",
			rule("list", "watch").groups(core).res("services", "endpoints"),
			rule("get", "list", "watch").groups(core).res("nodes"),
			eventsRule(),
			rule("list", "watch").groups(networking).res("servicecidrs"),
			rule("list", "watch").groups(discovery).res("endpointslices")),
		clusterRole("system:kube-scheduler",
			eventsRule(),
			rule("create").groups(coordination).res("leases"),
			rule("get", "update", "list", "watch").groups(coordination).named("leases", "kube-scheduler"),
			rule(readWrite...).groups(coordination).res("leasecandidates"),
			rule(read...).groups(core).res("nodes"),
			rule("get", "list", "watch", "delete").groups(core).res("pods"),
			rule("create").groups(core).res("pods/binding", "bindings"),
			rule("patch", "update").groups(core).res("pods/status"),
			rule(read...).groups(core).res("services", "replicationcontrollers"),
			rule(read...).groups(apps, extensions).res("replicasets"),
			rule(read...).groups(apps).res("statefulsets"),
			rule(read...).groups(policy).res("poddisruptionbudgets"),
			rule(read...).groups(core).res("persistentvolumeclaims", "persistentvolumes"),
			rule("create").groups(authn).res("tokenreviews"),
			rule("create").groups(authz).res("subjectaccessreviews"),
			rule(read...).groups(storage).res("csinodes"),
			rule("get", "list", "watch").groups(storage).res("volumeattachments"),
			rule(read...).groups(core).res("namespaces"),
			rule(read...).groups(storage).res("csidrivers"),
			rule(read...).groups(storage).res("csistoragecapacities")),
	}
	roles = append(roles, controllerRoles()...)
	for i := range roles {
		defaultMetadata(&roles[i].ObjectMeta)
	}
	return roles
}

// controllerRoles are upstream's system:controller:* roles of the controllers nodekit's controller
// manager runs (and the clusterrole-aggregation controller).
func controllerRoles() []rbacv1.ClusterRole {
	c := func(name string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
		return clusterRole(ControllerRolePrefix+name, rules...)
	}
	return []rbacv1.ClusterRole{
		c("clusterrole-aggregation-controller",
			rule("escalate", "get", "list", "watch", "update", "patch").groups(rbac).res("clusterroles")),
		c("cronjob-controller",
			rule("get", "list", "watch", "update").groups(batch).res("cronjobs"),
			rule("get", "list", "watch", "create", "update", "delete", "patch").groups(batch).res("jobs"),
			rule("update").groups(batch).res("cronjobs/status"),
			rule("update").groups(batch).res("cronjobs/finalizers"),
			rule("list", "watch", "delete").groups(core).res("pods"),
			eventsRule()),
		c("daemon-set-controller",
			rule("get", "list", "watch").groups(extensions, apps).res("daemonsets"),
			rule("update").groups(extensions, apps).res("daemonsets/status"),
			rule("update").groups(extensions, apps).res("daemonsets/finalizers"),
			rule("list", "watch").groups(core).res("nodes"),
			rule("list", "watch", "create", "delete", "patch").groups(core).res("pods"),
			rule("create").groups(core).res("pods/binding"),
			rule("get", "list", "watch", "create", "delete", "update", "patch").groups(apps).res("controllerrevisions"),
			eventsRule()),
		c("deployment-controller",
			rule("get", "list", "watch", "update").groups(extensions, apps).res("deployments"),
			rule("update").groups(extensions, apps).res("deployments/status"),
			rule("update").groups(extensions, apps).res("deployments/finalizers"),
			rule("get", "list", "watch", "create", "update", "patch", "delete").groups(apps, extensions).res("replicasets"),
			rule("get", "list", "watch", "update").groups(core).res("pods"),
			eventsRule()),
		c("disruption-controller",
			rule("get", "list", "watch").groups(extensions, apps).res("deployments"),
			rule("get", "list", "watch").groups(apps, extensions).res("replicasets"),
			rule("get", "list", "watch").groups(core).res("replicationcontrollers"),
			rule("get", "list", "watch").groups(policy).res("poddisruptionbudgets"),
			rule("get", "list", "watch").groups(apps).res("statefulsets"),
			rule("update").groups(policy).res("poddisruptionbudgets/status"),
			rule("patch", "update").groups(core).res("pods/status"),
			rule("get").groups("*").res("*/scale"),
			eventsRule()),
		c("endpoint-controller",
			rule("get", "list", "watch").groups(core).res("services", "pods"),
			rule("get", "list", "watch", "create", "update", "delete").groups(core).res("endpoints"),
			rule("create").groups(core).res("endpoints/restricted"),
			eventsRule()),
		c("endpointslice-controller",
			rule("get", "list", "watch").groups(core).res("services", "pods", "nodes"),
			rule("update").groups(core).res("services/finalizers"),
			rule("get", "list", "watch", "create", "update", "delete").groups(discovery).res("endpointslices"),
			eventsRule()),
		c("generic-garbage-collector",
			rule("get", "list", "watch", "patch", "update", "delete").groups("*").res("*"),
			eventsRule()),
		c("horizontal-pod-autoscaler",
			rule("get", "list", "watch").groups(autoscaling).res("horizontalpodautoscalers"),
			rule("update").groups(autoscaling).res("horizontalpodautoscalers/status"),
			rule("get", "update").groups("*").res("*/scale"),
			rule("list", "watch").groups(core).res("pods"),
			rule("list", "watch").groups(metricsGroup).res("pods"),
			rule("get", "list", "watch").groups(customMetrics).res("*"),
			rule("get", "list", "watch").groups(extMetrics).res("*"),
			eventsRule()),
		c("job-controller",
			rule("get", "list", "watch", "update", "patch").groups(batch).res("jobs"),
			rule("update").groups(batch).res("jobs/status"),
			rule("update").groups(batch).res("jobs/finalizers"),
			rule("list", "watch", "create", "delete", "patch").groups(core).res("pods"),
			eventsRule()),
		c("namespace-controller",
			rule("get", "list", "watch", "delete").groups(core).res("namespaces"),
			rule("update").groups(core).res("namespaces/finalize", "namespaces/status"),
			rule("get", "list", "watch", "delete", "deletecollection").groups("*").res("*")),
		c("node-controller",
			rule("get", "list", "watch", "update", "delete", "patch").groups(core).res("nodes"),
			rule("patch", "update").groups(core).res("nodes/status"),
			rule("patch", "update").groups(core).res("pods/status"),
			rule("list", "watch", "get", "delete").groups(core).res("pods"),
			rule("get", "list", "watch").groups(coordination).res("leases"),
			eventsRule()),
		c("persistent-volume-binder",
			rule("get", "list", "watch", "update", "create", "delete").groups(core).res("persistentvolumes"),
			rule("update").groups(core).res("persistentvolumes/status"),
			rule("get", "list", "watch", "update").groups(core).res("persistentvolumeclaims"),
			rule("update").groups(core).res("persistentvolumeclaims/status"),
			rule("list", "watch", "get", "create", "delete").groups(core).res("pods"),
			rule("get", "list").groups(core).res("nodes"),
			rule(read...).groups(storage).res("storageclasses"),
			eventsRule()),
		c("pod-garbage-collector",
			rule("list", "watch", "delete").groups(core).res("pods"),
			rule("get", "list", "watch").groups(core).res("nodes"),
			rule("patch").groups(core).res("pods/status")),
		c("replicaset-controller",
			rule("get", "list", "watch", "update").groups(apps, extensions).res("replicasets"),
			rule("update").groups(apps, extensions).res("replicasets/status"),
			rule("update").groups(apps, extensions).res("replicasets/finalizers"),
			rule("list", "watch", "patch", "create", "delete").groups(core).res("pods"),
			eventsRule()),
		c("replication-controller",
			rule("get", "list", "watch", "update").groups(core).res("replicationcontrollers"),
			rule("update").groups(core).res("replicationcontrollers/status"),
			rule("update").groups(core).res("replicationcontrollers/finalizers"),
			rule("list", "watch", "patch", "create", "delete").groups(core).res("pods"),
			eventsRule()),
		c("resourcequota-controller",
			// quota can count anything, so it lists and watches everything
			rule("list", "watch").groups("*").res("*"),
			rule("update").groups(core).res("resourcequotas/status"),
			eventsRule()),
		c("service-account-controller",
			rule("create").groups(core).res("serviceaccounts"),
			eventsRule()),
		c("statefulset-controller",
			rule("list", "watch").groups(core).res("pods"),
			rule("get", "list", "watch").groups(apps).res("statefulsets"),
			rule("update").groups(apps).res("statefulsets/status"),
			rule("update").groups(apps).res("statefulsets/finalizers"),
			rule("get", "create", "delete", "update", "patch").groups(core).res("pods"),
			rule("get", "create", "delete", "update", "patch", "list", "watch").groups(apps).res("controllerrevisions"),
			rule("get", "create", "list", "watch").groups(core).res("persistentvolumeclaims"),
			rule("update", "delete").groups(core).res("persistentvolumeclaims"),
			rule("update").groups(core).res("pods/finalizers"),
			eventsRule()),
		c("certificate-controller",
			rule("get", "list", "watch", "delete").groups(certificates).res("certificatesigningrequests"),
			rule("update").groups(certificates).res("certificatesigningrequests/status", "certificatesigningrequests/approval"),
			rule("approve").groups(certificates).named("signers", "kubernetes.io/kube-apiserver-client-kubelet"),
			rule("sign").groups(certificates).named("signers", "kubernetes.io/legacy-unknown",
				"kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"),
			rule("create").groups(authz).res("subjectaccessreviews"),
			eventsRule()),
		c("root-ca-cert-publisher",
			rule("create", "update").groups(core).res("configmaps"),
			eventsRule()),
		// list for a resource's current resourceVersion and its objects, patch to rewrite each; the
		// migrations themselves through the controller manager's informer (get, list, watch)
		c("storage-version-migrator-controller",
			rule("list", "patch").groups("*").res("*"),
			rule("get", "list", "watch").groups(storageMigration).res("storageversionmigrations"),
			rule("update").groups(storageMigration).res("storageversionmigrations/status"),
			rule("get").groups(apiextensions).res("customresourcedefinitions"),
			rule("update").groups(apiextensions).res("customresourcedefinitions/status")),
	}
}

// ClusterRoleBindings returns the bootstrap ClusterRoleBindings, labelled and annotated.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	b := func(name string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
		return rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subjects}
	}
	bindings := []rbacv1.ClusterRoleBinding{
		b("cluster-admin", group(user.SystemPrivilegedGroup)),
		b("system:monitoring", group(user.MonitoringGroup)),
		b("system:discovery", group(user.AllAuthenticated)),
		b("system:basic-user", group(user.AllAuthenticated)),
		b("system:public-info-viewer", group(user.AllAuthenticated), group(user.AllUnauthenticated)),
		b("system:node-proxier", userSubject(user.KubeProxy)),
		b("system:kube-controller-manager", userSubject(user.KubeControllerManager)),
		b("system:kube-dns", sa("kube-system", "kube-dns")),
		b("system:kube-scheduler", userSubject(user.KubeScheduler)),
		b("system:volume-scheduler", userSubject(user.KubeScheduler)),
		// upstream keeps this binding without subjects (the Node authorizer grants nodes their rules)
		b("system:node"),
		// every node reads all Nodes for its host-gw routes (docs/access-control.md: the trade-off)
		b(podnet.RouteReaderRole, group(user.NodesGroup)),
		b("system:service-account-issuer-discovery", group(serviceaccount.AllServiceAccountsGroup)),
	}
	// kubeadm's: bootstrap-token users may request node client certificates.
	kb := b("system:node-bootstrapper", group(BootstrappersGroup))
	kb.Name = "kubeadm:kubelet-bootstrap"
	bindings = append(bindings, kb)
	for _, r := range controllerRoles() {
		bindings = append(bindings, b(r.Name, sa("kube-system", r.Name[len(ControllerRolePrefix):]), userSubject(user.KubeControllerManager)))
	}
	for i := range bindings {
		defaultMetadata(&bindings[i].ObjectMeta)
	}
	return bindings
}

// NamespaceRoles returns the bootstrap Roles by namespace, labelled and annotated.
func NamespaceRoles() map[string][]rbacv1.Role {
	r := func(ns, name string, rules ...rbacv1.PolicyRule) rbacv1.Role {
		role := rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
		defaultMetadata(&role.ObjectMeta)
		return role
	}
	leaderLocking := []rbacv1.PolicyRule{
		rule("get", "watch", "list", "create", "update").groups(coordination).res("leases"),
		rule("get", "watch", "list", "create", "update").groups(coordination).res("leasecandidates"),
	}
	return map[string][]rbacv1.Role{
		metav1.NamespaceSystem: {
			r(metav1.NamespaceSystem, "extension-apiserver-authentication-reader",
				rule("get", "list", "watch").groups(core).named("configmaps", "extension-apiserver-authentication")),
			r(metav1.NamespaceSystem, ControllerRolePrefix+"bootstrap-signer", rule("get", "list", "watch").groups(core).res("secrets")),
			r(metav1.NamespaceSystem, ControllerRolePrefix+"token-cleaner",
				rule("get", "list", "watch", "delete").groups(core).res("secrets"), eventsRule()),
			r(metav1.NamespaceSystem, "system::leader-locking-kube-controller-manager", leaderLocking...),
			r(metav1.NamespaceSystem, "system::leader-locking-kube-scheduler", leaderLocking...),
		},
		metav1.NamespacePublic: {
			r(metav1.NamespacePublic, ControllerRolePrefix+"bootstrap-signer",
				rule("get", "list", "watch").groups(core).res("configmaps"),
				rule("update").groups(core).named("configmaps", "cluster-info"),
				eventsRule()),
			// kubeadm's: anonymous users may read the cluster-info ConfigMap to discover the cluster.
			r(metav1.NamespacePublic, "kubeadm:bootstrap-signer-clusterinfo",
				rule("get").groups(core).named("configmaps", "cluster-info")),
		},
	}
}

// NamespaceRoleBindings returns the bootstrap RoleBindings by namespace, labelled and annotated.
func NamespaceRoleBindings() map[string][]rbacv1.RoleBinding {
	b := func(ns, name, role string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
		rb := rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}, Subjects: subjects}
		defaultMetadata(&rb.ObjectMeta)
		return rb
	}
	kcm, sched := userSubject(user.KubeControllerManager), userSubject(user.KubeScheduler)
	return map[string][]rbacv1.RoleBinding{
		metav1.NamespaceSystem: {
			b(metav1.NamespaceSystem, "system::extension-apiserver-authentication-reader", "extension-apiserver-authentication-reader", kcm, sched),
			b(metav1.NamespaceSystem, "system::leader-locking-kube-controller-manager", "system::leader-locking-kube-controller-manager",
				kcm, sa(metav1.NamespaceSystem, "kube-controller-manager"), sa(metav1.NamespaceSystem, "leader-election-controller")),
			b(metav1.NamespaceSystem, "system::leader-locking-kube-scheduler", "system::leader-locking-kube-scheduler", sched, sa(metav1.NamespaceSystem, "kube-scheduler")),
			b(metav1.NamespaceSystem, ControllerRolePrefix+"bootstrap-signer", ControllerRolePrefix+"bootstrap-signer", sa(metav1.NamespaceSystem, "bootstrap-signer"), kcm),
			b(metav1.NamespaceSystem, ControllerRolePrefix+"token-cleaner", ControllerRolePrefix+"token-cleaner", sa(metav1.NamespaceSystem, "token-cleaner"), kcm),
		},
		metav1.NamespacePublic: {
			b(metav1.NamespacePublic, ControllerRolePrefix+"bootstrap-signer", ControllerRolePrefix+"bootstrap-signer", sa(metav1.NamespaceSystem, "bootstrap-signer"), kcm),
			b(metav1.NamespacePublic, "kubeadm:bootstrap-signer-clusterinfo", "kubeadm:bootstrap-signer-clusterinfo", userSubject(user.Anonymous)),
		},
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func sa(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

func defaultMetadata(m *metav1.ObjectMeta) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels["kubernetes.io/bootstrapping"] = "rbac-defaults"
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[rbacv1.AutoUpdateAnnotationKey] = "true"
}
