package addons

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/images/bundled"
)

// The coredns add-on's object names: upstream's (kubeadm's and CoreDNS's own deployment manifests).
const (
	// DNSServiceName is the cluster DNS Service in kube-system.
	DNSServiceName = "kube-dns"
	// CoreDNSName names the Deployment, ServiceAccount and ConfigMap in kube-system.
	CoreDNSName = "coredns"
	// CoreDNSClusterRole names the ClusterRole and ClusterRoleBinding.
	CoreDNSClusterRole = "system:coredns"
	// DNSAppLabel is the label (k8s-app=kube-dns) the Service selects the CoreDNS pods by.
	DNSAppLabel = "k8s-app"
	DNSAppValue = "kube-dns"
)

// Corefile returns CoreDNS's configuration for the cluster domain: upstream's default Corefile
// (kubeadm's) without the prometheus plugin. The kubernetes plugin answers for the domain and the
// reverse zones (pod records in "insecure" mode, as upstream), everything else is forwarded to the
// nameservers of the CoreDNS pod's resolv.conf (dnsPolicy Default: the node's).
func Corefile(domain string) string {
	return strings.ReplaceAll(`.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes DOMAIN in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    forward . /etc/resolv.conf {
        max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`, "DOMAIN", domain)
}

// corednsObjects are the coredns add-on's objects, in apply order.
func corednsObjects(client kubernetes.Interface, o Options) ([]object, error) {
	ip, err := DNSServiceIP(o.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	ns := metav1.NamespaceSystem
	app := map[string]string{DNSAppLabel: DNSAppValue}

	sa := &v1.ServiceAccount{ObjectMeta: meta(CoreDNS, ns, CoreDNSName, nil)}
	// What CoreDNS's kubernetes plugin reads (upstream's ClusterRole, less Endpoints, which CoreDNS
	// 1.9 and later no longer watch: it reads EndpointSlices).
	role := &rbacv1.ClusterRole{ObjectMeta: meta(CoreDNS, "", CoreDNSClusterRole, map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: meta(CoreDNS, "", CoreDNSClusterRole, map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CoreDNSClusterRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: CoreDNSName, Namespace: ns}}}
	cm := &v1.ConfigMap{ObjectMeta: meta(CoreDNS, ns, CoreDNSName, nil), Data: map[string]string{"Corefile": Corefile(o.ClusterDomain)}}
	dep := corednsDeployment(ns, app)
	svc := &v1.Service{ObjectMeta: meta(CoreDNS, ns, DNSServiceName, map[string]string{DNSAppLabel: DNSAppValue,
		"kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}),
		Spec: v1.ServiceSpec{Selector: app, ClusterIP: ip.String(), ClusterIPs: []string{ip.String()}, Type: v1.ServiceTypeClusterIP,
			Ports: []v1.ServicePort{
				{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			}}}

	core, rbac, apps := client.CoreV1(), client.RbacV1(), client.AppsV1()
	saC := typed[*v1.ServiceAccount]{get: core.ServiceAccounts(ns).Get, create: core.ServiceAccounts(ns).Create,
		update: core.ServiceAccounts(ns).Update, delete: core.ServiceAccounts(ns).Delete, labels: func(x *v1.ServiceAccount) map[string]string { return x.Labels }}
	roleC := typed[*rbacv1.ClusterRole]{get: rbac.ClusterRoles().Get, create: rbac.ClusterRoles().Create, update: rbac.ClusterRoles().Update,
		delete: rbac.ClusterRoles().Delete, labels: func(x *rbacv1.ClusterRole) map[string]string { return x.Labels }}
	bindC := typed[*rbacv1.ClusterRoleBinding]{get: rbac.ClusterRoleBindings().Get, create: rbac.ClusterRoleBindings().Create,
		update: rbac.ClusterRoleBindings().Update, delete: rbac.ClusterRoleBindings().Delete,
		labels: func(x *rbacv1.ClusterRoleBinding) map[string]string { return x.Labels }}
	cmC := typed[*v1.ConfigMap]{get: core.ConfigMaps(ns).Get, create: core.ConfigMaps(ns).Create, update: core.ConfigMaps(ns).Update,
		delete: core.ConfigMaps(ns).Delete, labels: func(x *v1.ConfigMap) map[string]string { return x.Labels }}
	depC := typed[*appsv1.Deployment]{get: apps.Deployments(ns).Get, create: apps.Deployments(ns).Create, update: apps.Deployments(ns).Update,
		delete: apps.Deployments(ns).Delete, labels: func(x *appsv1.Deployment) map[string]string { return x.Labels }}
	svcC := typed[*v1.Service]{get: core.Services(ns).Get, create: core.Services(ns).Create, update: core.Services(ns).Update,
		delete: core.Services(ns).Delete, labels: func(x *v1.Service) map[string]string { return x.Labels }}

	return []object{
		{kind: "ServiceAccount", name: ns + "/" + sa.Name,
			apply: func(ctx context.Context) (bool, error) {
				return reconcile(ctx, saC, sa.Name, sa, func(have, want *v1.ServiceAccount) bool {
					have.Labels = mergeLabels(have.Labels, want.Labels)
					return true
				})
			},
			remove: func(ctx context.Context) error { return remove(ctx, saC, sa.Name, CoreDNS) }},
		{kind: "ClusterRole", name: role.Name, rbac: true,
			apply: func(ctx context.Context) (bool, error) {
				return reconcile(ctx, roleC, role.Name, role, func(have, want *rbacv1.ClusterRole) bool {
					have.Labels, have.Rules, have.AggregationRule = mergeLabels(have.Labels, want.Labels), want.Rules, nil
					return true
				})
			},
			remove: func(ctx context.Context) error { return remove(ctx, roleC, role.Name, CoreDNS) }},
		{kind: "ClusterRoleBinding", name: binding.Name, rbac: true,
			apply: func(ctx context.Context) (bool, error) {
				return reconcile(ctx, bindC, binding.Name, binding, func(have, want *rbacv1.ClusterRoleBinding) bool {
					// roleRef is immutable: a binding to another role is replaced.
					have.Labels, have.Subjects = mergeLabels(have.Labels, want.Labels), want.Subjects
					return have.RoleRef == want.RoleRef
				})
			},
			remove: func(ctx context.Context) error { return remove(ctx, bindC, binding.Name, CoreDNS) }},
		{kind: "ConfigMap", name: ns + "/" + cm.Name,
			apply: func(ctx context.Context) (bool, error) {
				return reconcile(ctx, cmC, cm.Name, cm, func(have, want *v1.ConfigMap) bool {
					have.Labels, have.Data, have.BinaryData = mergeLabels(have.Labels, want.Labels), want.Data, nil
					return true
				})
			},
			remove: func(ctx context.Context) error { return remove(ctx, cmC, cm.Name, CoreDNS) }},
		{kind: "Deployment", name: ns + "/" + dep.Name,
			apply: func(ctx context.Context) (bool, error) {
				return reconcile(ctx, depC, dep.Name, dep, func(have, want *appsv1.Deployment) bool {
					// spec.selector is immutable: a Deployment selecting other pods is replaced.
					same := equality.Semantic.DeepEqual(have.Spec.Selector, want.Spec.Selector)
					have.Labels = mergeLabels(have.Labels, want.Labels)
					have.Spec.Replicas, have.Spec.Strategy, have.Spec.Template = want.Spec.Replicas, want.Spec.Strategy, want.Spec.Template
					return same
				})
			},
			remove: func(ctx context.Context) error { return remove(ctx, depC, dep.Name, CoreDNS) }},
		{kind: "Service", name: ns + "/" + svc.Name,
			apply: func(ctx context.Context) (bool, error) {
				return reconcile(ctx, svcC, svc.Name, svc, func(have, want *v1.Service) bool {
					// spec.clusterIP is immutable: a kube-dns at another address (the service range
					// changed) is replaced.
					same := have.Spec.ClusterIP == want.Spec.ClusterIP
					have.Labels = mergeLabels(have.Labels, want.Labels)
					have.Spec.Selector, have.Spec.Ports, have.Spec.Type = want.Spec.Selector, want.Spec.Ports, want.Spec.Type
					return same
				})
			},
			remove: func(ctx context.Context) error { return remove(ctx, svcC, svc.Name, CoreDNS) }},
	}, nil
}

// corednsDeployment is CoreDNS's Deployment: upstream's (kubeadm's) pod, one replica, from the bundled
// image; the ServiceAccount admission plugin mounts its token where client-go's in-cluster config reads it.
func corednsDeployment(ns string, app map[string]string) *appsv1.Deployment {
	one := int32(1)
	maxUnavailable := intstr.FromInt32(1)
	no, yes := false, true
	configMode := int32(0o644)
	return &appsv1.Deployment{ObjectMeta: meta(CoreDNS, ns, CoreDNSName, app),
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: app},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: app},
				Spec: v1.PodSpec{
					ServiceAccountName: CoreDNSName,
					// as upstream's manifest: DNS outranks workloads, so a full cluster preempts for it
					PriorityClassName: "system-cluster-critical",
					// CoreDNS forwards what is not the cluster's to the node's resolvers, so it must
					// not be given itself as its nameserver.
					DNSPolicy:    v1.DNSDefault,
					NodeSelector: map[string]string{v1.LabelOSStable: "linux"},
					Tolerations: []v1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: v1.TolerationOpExists},
						{Key: "node-role.kubernetes.io/control-plane", Effect: v1.TaintEffectNoSchedule},
					},
					Containers: []v1.Container{{
						Name: CoreDNSName, Image: bundled.CoreDNS, ImagePullPolicy: v1.PullIfNotPresent,
						Args: []string{"-conf", "/etc/coredns/Corefile"},
						Resources: v1.ResourceRequirements{
							Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("170Mi")},
							Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("70Mi")},
						},
						Ports: []v1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: v1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: v1.ProtocolTCP},
						},
						VolumeMounts: []v1.VolumeMount{
							{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true},
						},
						SecurityContext: &v1.SecurityContext{
							AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
							Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_BIND_SERVICE"}, Drop: []v1.Capability{"ALL"}},
						},
						LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}},
							InitialDelaySeconds: 60, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 5},
						ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
							PeriodSeconds: 2, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
					}},
					Volumes: []v1.Volume{
						{Name: "config-volume", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
							LocalObjectReference: v1.LocalObjectReference{Name: CoreDNSName},
							Items:                []v1.KeyToPath{{Key: "Corefile", Path: "Corefile"}}, DefaultMode: &configMode}}},
					},
				},
			},
		}}
}
