package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
)

// fleetService stands in for a running llmdiag: two nodes, one of them
// overloaded.
type fleetService struct {
	llmdiagv1connect.UnimplementedDiagnosisServiceHandler
}

func (fleetService) ListNodes(context.Context, *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	return connect.NewResponse(&llmdiagv1.ListNodesResponse{Nodes: []*llmdiagv1.Node{
		{Id: "glm-4.6-0", Model: "glm-4.6", Status: llmdiagv1.Status_STATUS_OK, Routable: true, LoadScore: 0.3},
		{Id: "glm-4.6-1", Model: "glm-4.6", Status: llmdiagv1.Status_STATUS_CRIT, RootCause: llmdiagv1.Cause_CAUSE_OVERLOADED, LoadScore: 2.4},
	}}), nil
}

// serve starts fleetService on a loopback port over HTTP/1.1 and h2c and
// returns its URL.
func serve() (string, func()) {
	mux := http.NewServeMux()
	mux.Handle(llmdiagv1connect.NewDiagnosisServiceHandler(fleetService{}))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &p}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }
}

// A router asks which nodes may take traffic, over gRPC.
func Example() {
	url, stop := serve()
	defer stop()

	c, err := client.New(url, client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		panic(err)
	}
	resp, err := c.ListNodes(context.Background(), connect.NewRequest(&llmdiagv1.ListNodesRequest{Model: "glm-4.6"}))
	if err != nil {
		panic(err)
	}
	for _, n := range resp.Msg.GetNodes() {
		fmt.Printf("%s routable=%v score=%.1f cause=%s\n", n.GetId(), n.GetRoutable(), n.GetLoadScore(), n.GetRootCause())
	}
	// Output:
	// glm-4.6-0 routable=true score=0.3 cause=CAUSE_UNSPECIFIED
	// glm-4.6-1 routable=false score=2.4 cause=CAUSE_OVERLOADED
}

// Errors carry Connect codes: here the stand-in does not implement
// DiagnoseNode.
func ExampleNew_errors() {
	url, stop := serve()
	defer stop()

	c, _ := client.New(url) // Connect protocol, binary
	_, err := c.DiagnoseNode(context.Background(), connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: "glm-4.6-0"}))
	fmt.Println(connect.CodeOf(err))
	_, err = client.New("localhost:8080")
	fmt.Println(err)
	// Output:
	// unimplemented
	// base url "localhost:8080": want http://host:port or https://host:port
}
