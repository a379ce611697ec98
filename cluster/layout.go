package cluster

import "path/filepath"

// Layout is the part of an up or lab data dir that cluster itself owns, defined here once; the
// components' own parts come from server.Config.Paths and agent.Config.Paths.
type Layout struct {
	// Logs holds one <component>.log per supervised process (<DataDir>/logs).
	Logs string
	// Run holds one <component>.pid per supervised process (<DataDir>/run).
	Run string
	// NodeCredentials holds up's node client certificate and kubelet.kubeconfig (<DataDir>/agent).
	NodeCredentials string
	// LabServer is a lab's server data dir (<DataDir>/server); LabNodes holds one data dir per lab
	// node (<DataDir>/nodes/<node>).
	LabServer, LabNodes string
}

// LayoutOf returns the layout of dataDir.
func LayoutOf(dataDir string) Layout {
	return Layout{Logs: filepath.Join(dataDir, "logs"), Run: filepath.Join(dataDir, "run"),
		NodeCredentials: filepath.Join(dataDir, "agent"), LabServer: filepath.Join(dataDir, "server"),
		LabNodes: filepath.Join(dataDir, "nodes")}
}

// LogFile is the log file of component name.
func (l Layout) LogFile(name string) string { return filepath.Join(l.Logs, name+".log") }

// PIDFile is where the running PID of component name is kept.
func (l Layout) PIDFile(name string) string { return filepath.Join(l.Run, name+".pid") }
