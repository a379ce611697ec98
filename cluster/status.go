package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/examples"
)

// PrintSummary writes where the kubeconfig is, how to reach the cluster with kubectl and `nodekit
// crictl`, and a status table of the components, the node, the demo pods and the demo Service (with one
// answer fetched through its ClusterIP from this host).
func (c *Cluster) PrintSummary(ctx context.Context, w io.Writer) {
	cfg := c.cfg
	cli := cliWithDataDir(cfg.CLI, cfg.DataDir, DefaultDataDir)
	fmt.Fprintf(w, "\nnodekit is up: node %s, data in %s\n\n", cfg.NodeName, cfg.DataDir)
	fmt.Fprintf(w, "  kubeconfig  %s\n", c.AdminKubeconfig)
	fmt.Fprintf(w, "  kubectl     export KUBECONFIG=%s; kubectl get nodes,pods,svc -o wide\n", c.AdminKubeconfig)
	fmt.Fprintf(w, "  runtime     %s crictl ps   (also: pods, images, logs, exec -it)\n", cli)
	fmt.Fprintf(w, "  logs        %s/{server,agent}.log, %s\n", LayoutOf(cfg.DataDir).Logs,
		agent.Config{DataDir: cfg.DataDir}.Paths().ContainerdLog)
	fmt.Fprintf(w, "  stop        Ctrl-C (pods keep running; '%s up' resumes), '%s down [--purge]' removes them\n\n", cli, cli)
	c.WriteStatus(ctx, w)
}

// WriteStatus writes the status tables: components (PID, state, restarts), the node, the demo pods and
// the demo Service with its endpoints and one answer through the ClusterIP.
func (c *Cluster) WriteStatus(ctx context.Context, w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tPID\tSTATE\tRESTARTS")
	for _, comp := range c.components {
		pid, running, restarts := comp.state()
		state := "running"
		if !running {
			state = "exited"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", comp.name, pid, state, restarts)
	}
	fmt.Fprintln(tw)
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{}); err == nil {
		fmt.Fprintln(tw, "NODE\tSTATUS\tINTERNAL-IP\tPOD-CIDR\tRUNTIME")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, nodeStatus(n), nodeIP(n), n.Spec.PodCIDR, n.Status.NodeInfo.ContainerRuntimeVersion)
		fmt.Fprintln(tw)
	}
	sel := "app.kubernetes.io/name=" + examples.DemoName
	if pods, err := c.Client.CoreV1().Pods(examples.DemoNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil && len(pods.Items) > 0 {
		sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
		fmt.Fprintln(tw, "POD\tREADY\tSTATUS\tRESTARTS\tIP\tNODE")
		for _, p := range pods.Items {
			ready, restarts := 0, int32(0)
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Ready {
					ready++
				}
				restarts += cs.RestartCount
			}
			fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%d\t%s\t%s\n", p.Namespace+"/"+p.Name, ready, len(p.Spec.Containers), p.Status.Phase, restarts, p.Status.PodIP, p.Spec.NodeName)
		}
		fmt.Fprintln(tw)
	}
	svc, err := c.Client.CoreV1().Services(examples.DemoNamespace).Get(ctx, examples.DemoName, metav1.GetOptions{})
	if err == nil && len(svc.Spec.Ports) > 0 {
		eps := c.readyEndpoints(ctx, svc)
		url := ServiceURL(svc)
		fmt.Fprintln(tw, "SERVICE\tCLUSTER-IP\tPORT\tREADY-ENDPOINTS\tTRY")
		fmt.Fprintf(tw, "%s\t%s\t%d/%s\t%s\tcurl %s\n", svc.Namespace+"/"+svc.Name, svc.Spec.ClusterIP, svc.Spec.Ports[0].Port, svc.Spec.Ports[0].Protocol, strings.Join(eps, ","), url)
		tw.Flush()
		if answer, err := Get(ctx, url, 10*time.Second); err == nil {
			fmt.Fprintf(w, "\n$ curl %s\n%s\n", url, answer)
		} else {
			fmt.Fprintf(w, "\nthe demo Service does not answer yet: %v\n", err)
		}
		return
	}
	tw.Flush()
}

func (c *Cluster) readyEndpoints(ctx context.Context, svc *v1.Service) []string {
	slices, err := c.Client.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				for _, p := range s.Ports {
					if p.Port != nil {
						out = append(out, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
					}
				}
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"<none>"}
	}
	return out
}

// ServiceURL is http://<ClusterIP>[:<first port>]/ of svc (the port omitted when 80).
func ServiceURL(svc *v1.Service) string {
	if port := svc.Spec.Ports[0].Port; port != 80 {
		return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port))) + "/"
	}
	return "http://" + svc.Spec.ClusterIP + "/"
}

// Get fetches url once (keep-alives off, so every call opens a new connection and the proxy's
// load-balancing applies per call) and returns the trimmed body; a non-200 status is an error.
func Get(ctx context.Context, url string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(b)), nil
}

func nodeStatus(n *v1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			if c.Status == v1.ConditionTrue {
				return "Ready"
			}
			return "NotReady"
		}
	}
	return "Unknown"
}

func nodeIP(n *v1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
