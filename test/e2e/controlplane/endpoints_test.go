package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/controlplane/controllers/endpointslicemirroring"
)

// testEndpointHostnames runs in TestRollingUpdateKeepsAvailabilityAndEndpointSlicesFollowReadiness's
// cluster (its nodes run the pods): a pod whose spec.subdomain names a headless Service carries its
// spec.hostname in that Service's EndpointSlice and Endpoints (CoreDNS answers
// <hostname>.<service>.<ns>.svc from it: the DNS Hostname/Subdomain conformance specs); a pod of
// another subdomain carries none. Then the mirroring controller (testEndpointSliceMirroring).
func testEndpointHostnames(t *testing.T, c *cluster) {
	ctx := context.Background()
	ns := c.namespace("hostnames")
	_, err := c.Client.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "sub"},
		Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Selector: map[string]string{"app": "dnsq"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	must(t, err)
	for name, subdomain := range map[string]string{"querier": "sub", "stranger": "other"} {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, testPod(ns, name, map[string]string{"app": "dnsq"}, func(s *v1.PodSpec) {
			s.Hostname, s.Subdomain = name, subdomain
		}), metav1.CreateOptions{})
		must(t, err)
	}
	eventually(t, 30*time.Second, "hostnames in the headless service's endpoints", func() error {
		got := map[string]string{}
		list, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=sub"})
		if err != nil {
			return err
		}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				got[e.TargetRef.Name] = deref(e.Hostname)
			}
		}
		ep, err := c.Client.CoreV1().Endpoints(ns).Get(ctx, "sub", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, ss := range ep.Subsets {
			for _, a := range append(ss.Addresses, ss.NotReadyAddresses...) {
				got["endpoints/"+a.TargetRef.Name] = a.Hostname
			}
		}
		want := map[string]string{"querier": "querier", "stranger": "", "endpoints/querier": "querier", "endpoints/stranger": ""}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return errorf("hostnames by pod %v, want %v", got, want)
		}
		return nil
	})
	// The Service has a selector: its Endpoints are the EndpointSlice controller's, never mirrored.
	if list, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelManagedBy + "=" + endpointslicemirroring.ManagedBy}); err != nil || len(list.Items) != 0 {
		t.Fatalf("mirrored slices of a selector Service: %d (%v)", len(list.Items), err)
	}
	testEndpointSliceMirroring(t, c, ns)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// testEndpointSliceMirroring: the Endpoints of a Service without a selector are mirrored into one
// EndpointSlice (managed-by the mirroring controller, the Endpoints' labels and annotations, owned by
// the Endpoints, ready and not-ready addresses, hostname), follow its updates, go away while it is
// labelled skip-mirror and come back without it, and are deleted with it (the conformance spec
// "EndpointSliceMirroring should mirror a custom Endpoints resource through create update and delete");
// Endpoints without a Service are neither deleted nor mirrored.
func testEndpointSliceMirroring(t *testing.T, c *cluster, ns string) {
	ctx := context.Background()
	// Endpoints with no Service are left alone: neither deleted (upstream's endpoints controller
	// removes Endpoints only with their Service; conformance "should test the lifecycle of an
	// Endpoint") nor mirrored. Checked at the end, after the steps below converged.
	_, err := c.Client.CoreV1().Endpoints(ns).Create(ctx, &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
		Subsets: []v1.EndpointSubset{{Ports: []v1.EndpointPort{{Name: "http", Port: 80}},
			Addresses: []v1.EndpointAddress{{IP: "10.0.0.24"}}}},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = c.Client.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "custom"},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "example", Port: 80, Protocol: v1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	must(t, err)
	ep, err := c.Client.CoreV1().Endpoints(ns).Create(ctx, &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "custom", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"note": "x", v1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}},
		Subsets: []v1.EndpointSubset{{
			Ports:             []v1.EndpointPort{{Name: "example", Port: 80}},
			Addresses:         []v1.EndpointAddress{{IP: "10.1.2.3"}},
			NotReadyAddresses: []v1.EndpointAddress{{IP: "10.1.2.4", Hostname: "db"}},
		}},
	}, metav1.CreateOptions{})
	must(t, err)
	mirrored := func() ([]discoveryv1.EndpointSlice, error) {
		list, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=custom"})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	// state renders the one mirrored slice as "addr:ready:hostname ..." after checking its metadata.
	state := func() (string, error) {
		list, err := mirrored()
		if err != nil {
			return "", err
		}
		if len(list) != 1 {
			return "", errorf("%d mirrored slices, want 1", len(list))
		}
		s := list[0]
		if s.Labels[discoveryv1.LabelManagedBy] != endpointslicemirroring.ManagedBy || s.Labels["team"] != "a" {
			return "", errorf("slice labels %v", s.Labels)
		}
		if _, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]; ok || s.Annotations["note"] != "x" {
			return "", errorf("slice annotations %v", s.Annotations)
		}
		if ref := metav1.GetControllerOf(&s); ref == nil || ref.Kind != "Endpoints" || ref.UID != ep.UID {
			return "", errorf("slice owner %+v", s.OwnerReferences)
		}
		if s.AddressType != discoveryv1.AddressTypeIPv4 || len(s.Ports) != 1 || *s.Ports[0].Port != 80 ||
			*s.Ports[0].Name != "example" || *s.Ports[0].Protocol != v1.ProtocolTCP {
			return "", errorf("slice %s ports %+v", s.AddressType, s.Ports)
		}
		out := ""
		for _, e := range s.Endpoints {
			out += fmt.Sprintf("%s:%v:%s ", e.Addresses[0], *e.Conditions.Ready, deref(e.Hostname))
		}
		return out, nil
	}
	expect := func(what, want string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() error {
			got, err := state()
			if err != nil {
				return err
			}
			if got != want {
				return errorf("mirrored endpoints %q, want %q", got, want)
			}
			return nil
		})
	}
	gone := func(what string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() error {
			list, err := mirrored()
			if err != nil {
				return err
			}
			if len(list) != 0 {
				return errorf("%d mirrored slices remain", len(list))
			}
			return nil
		})
	}
	expect("endpoints mirrored", "10.1.2.3:true: 10.1.2.4:false:db ")

	update := func(mutate func(*v1.Endpoints)) {
		t.Helper()
		cur, err := c.Client.CoreV1().Endpoints(ns).Get(ctx, "custom", metav1.GetOptions{})
		must(t, err)
		mutate(cur)
		_, err = c.Client.CoreV1().Endpoints(ns).Update(ctx, cur, metav1.UpdateOptions{})
		must(t, err)
	}
	update(func(e *v1.Endpoints) {
		e.Subsets[0].Addresses = []v1.EndpointAddress{{IP: "10.2.3.4"}}
		e.Subsets[0].NotReadyAddresses = nil
	})
	expect("update mirrored", "10.2.3.4:true: ")

	update(func(e *v1.Endpoints) { e.Labels[discoveryv1.LabelSkipMirror] = "true" })
	gone("skip-mirror removes the mirrored slice")
	update(func(e *v1.Endpoints) { delete(e.Labels, discoveryv1.LabelSkipMirror) })
	expect("mirrored again without skip-mirror", "10.2.3.4:true: ")

	must(t, c.Client.CoreV1().Endpoints(ns).Delete(ctx, "custom", metav1.DeleteOptions{}))
	gone("mirrored slice deleted with its endpoints")

	if _, err := c.Client.CoreV1().Endpoints(ns).Get(ctx, "orphan", metav1.GetOptions{}); err != nil {
		t.Fatalf("endpoints without a service: %v", err)
	}
	if list, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=orphan"}); err != nil || len(list.Items) != 0 {
		t.Fatalf("slices of endpoints without a service: %d (%v)", len(list.Items), err)
	}
}
