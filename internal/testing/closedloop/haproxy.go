package closedloop

import (
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// CfgTemplate is the haproxy.cfg of both arms: one frontend, one backend
// of the fleet's nodes balanced alike in both arms, each server checked
// over HTTP on the engine's /health. With Agent set (arm B) each server
// also takes its weight and state from llmdiag's agent check every 500ms.
var CfgTemplate = template.Must(template.New("haproxy.cfg").Parse(`global
    # the runtime API: show stat
    stats socket {{.Socket}} level admin

defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout check 1s

frontend inference
    bind {{.Bind}}
    default_backend {{.Backend}}

backend {{.Backend}}
    balance {{.Balance}}
    option httpchk GET /health
{{- range .Servers}}
    server {{.ID}} {{.Addr}} check inter 1s weight 100{{if $.Agent}} agent-check agent-addr {{$.AgentAddr}} agent-port {{$.AgentPort}} agent-send "{{.ID}}\n" agent-inter {{$.AgentInter}}{{end}}
{{- end}}
`))

// CfgValues fill CfgTemplate.
type CfgValues struct {
	Socket, Bind, Backend string
	// Balance is the backend's balance algorithm: leastconn, roundrobin.
	Balance string
	Servers []CfgServer
	// Agent adds the agent check at AgentAddr:AgentPort every AgentInter.
	Agent      bool
	AgentAddr  string
	AgentPort  int
	AgentInter string
}

// CfgServer is one server line: the node id and its host:port.
type CfgServer struct{ ID, Addr string }

// Render is CfgTemplate filled with v.
func Render(v CfgValues) (string, error) {
	var b strings.Builder
	if err := CfgTemplate.Execute(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// ServerStat is one server's row of HAProxy's show stat.
type ServerStat struct {
	Status string
	Weight int
	// AgentStatus is the last agent check's (L7OK, L4CON, …); LastAgent
	// the agent's last reply as HAProxy shows it.
	AgentStatus, LastAgent string
	// Stot is the sessions (here requests: one a connection) the server
	// was given since HAProxy started; Cur those open now.
	Stot, Cur int
}

// ShowStat asks HAProxy's runtime API at sock for show stat: the servers
// by name.
func ShowStat(sock string) (map[string]ServerStat, error) {
	b, err := RuntimeCommand(sock, "show stat")
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(b), "# ")))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("show stat: %w", err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("show stat: empty answer")
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	get := func(row []string, name string) string {
		if i, ok := col[name]; ok && i < len(row) {
			return row[i]
		}
		return ""
	}
	num := func(row []string, name string) int { v, _ := strconv.Atoi(get(row, name)); return v }
	out := map[string]ServerStat{}
	for _, row := range rows[1:] {
		if sv := get(row, "svname"); sv != "" && sv != "FRONTEND" && sv != "BACKEND" {
			out[sv] = ServerStat{Status: get(row, "status"), Weight: num(row, "weight"), Stot: num(row, "stot"), Cur: num(row, "scur"),
				AgentStatus: get(row, "agent_status"), LastAgent: get(row, "last_agt")}
		}
	}
	return out, nil
}

// RuntimeCommand sends one command to HAProxy's runtime API at sock and
// returns its answer.
func RuntimeCommand(sock, cmd string) ([]byte, error) {
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return nil, err
	}
	return io.ReadAll(c)
}

// AgentReply asks the agent at addr for node's reply, as HAProxy does.
func AgentReply(addr, node string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, node+"\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}

// agentWeight is the weight of a "ready up NN%" reply; ok is false for
// any other.
func agentWeight(reply string) (int, bool) {
	rest, ok := strings.CutPrefix(reply, "ready up ")
	if !ok {
		return 0, false
	}
	pct, _, ok := strings.Cut(rest, "%")
	if !ok {
		return 0, false
	}
	w, err := strconv.Atoi(pct)
	return w, err == nil
}
