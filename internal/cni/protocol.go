// Package cni is the wire protocol between the CNI plugin binary (ovnt-cni) and the node
// agent (ovnt-node). The plugin is a thin forwarder: it packs what the container runtime gave
// it (the CNI_* environment and the network configuration on stdin) into a Request, sends it
// to the agent, and prints whatever the agent answers.
//
// The transport is HTTP/1.1 over a local stream socket (AF_UNIX on Linux and on Windows):
//
//	POST /cni  Content-Type: application/json  body: Request
//	200 OK     body: the bytes the plugin prints on stdout (an ADD result already converted to
//	           the cniVersion of the request; empty for DEL, CHECK, GC and STATUS)
//	4xx/5xx    body: a CNI error object {"cniVersion","code","msg","details"}
//
// HTTP gives the exchange framing, a status to tell success from failure, and a deadline per
// request through the client's context, with nothing to maintain on either side.
package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// Path is the HTTP path the agent serves CNI requests on.
const Path = "/cni"

// maxBody bounds what either side reads: a network configuration or a result is a few KiB.
const maxBody = 1 << 20

// Request is one CNI invocation as the runtime made it.
type Request struct {
	// Command is CNI_COMMAND: ADD, DEL, CHECK, GC or STATUS (VERSION never leaves the plugin).
	Command     string `json:"command"`
	ContainerID string `json:"containerID,omitempty"`
	Netns       string `json:"netns,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	// Args is CNI_ARGS, "K1=V1;K2=V2".
	Args string `json:"args,omitempty"`
	// Path is CNI_PATH.
	Path string `json:"path,omitempty"`
	// StdinData is the network configuration the runtime wrote to the plugin's stdin.
	StdinData json.RawMessage `json:"stdinData"`
}

// Doer sends a request to the agent. The Client implements it; tests may call the agent's
// handler directly.
type Doer interface {
	// Do returns the bytes to print on success, or a *types.Error.
	Do(ctx context.Context, req Request) ([]byte, error)
}

// Client talks to the agent through dial.
type Client struct {
	http *http.Client
}

// NewClient returns a client that opens each connection with dial (the OS-specific part:
// a unix socket path on Linux and Windows alike).
func NewClient(dial func(ctx context.Context) (net.Conn, error)) *Client {
	return &Client{http: &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true, // one request per plugin process
	}}}
}

// ErrUnreachable wraps a failure to reach the agent at all (no socket, connection refused),
// as opposed to an error the agent answered with.
var ErrUnreachable = errors.New("node agent unreachable")

// Do sends req. The error is a *types.Error when the agent answered with one, and wraps
// ErrUnreachable when the agent could not be reached.
func (c *Client) Do(ctx context.Context, req Request) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	// The host part is ignored: DialContext always dials the agent's socket.
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://ovnt-node"+Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the agent's answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return out, nil
	}
	var cerr types.Error
	if err := json.Unmarshal(out, &cerr); err != nil || cerr.Code == 0 {
		return nil, types.NewError(types.ErrInternal, fmt.Sprintf("node agent answered %s", resp.Status), string(out))
	}
	return nil, &cerr
}

// Handler serves one request: it returns what the plugin prints, or an error. An error that
// is not a *types.Error is sent as code 999 (internal).
type Handler func(ctx context.Context, req Request) ([]byte, error)

// NewHTTPHandler adapts h to HTTP, for the agent's server.
func NewHTTPHandler(h Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
			writeError(w, types.NewError(types.ErrDecodingFailure, "decoding the CNI request", err.Error()))
			return
		}
		out, err := h(r.Context(), req)
		if err != nil {
			writeError(w, AsCNIError(err))
			return
		}
		w.WriteHeader(http.StatusOK)
		w.Write(out)
	})
	return mux
}

// NewServer returns an http.Server for h with timeouts fit for a local socket; Serve it on
// the agent's listener.
func NewServer(h Handler) *http.Server {
	return &http.Server{
		Handler:           NewHTTPHandler(h),
		ReadHeaderTimeout: 10 * time.Second,
	}
}

// AsCNIError returns err as a CNI error: itself if it is one; the code of the CNI error in
// its chain with err's whole text as the message if it wraps one; else code 999.
func AsCNIError(err error) *types.Error {
	if e, ok := err.(*types.Error); ok {
		return e
	}
	var cerr *types.Error
	if errors.As(err, &cerr) {
		return &types.Error{Code: cerr.Code, Msg: err.Error()}
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}

func writeError(w http.ResponseWriter, e *types.Error) {
	status := http.StatusInternalServerError
	switch e.Code {
	case types.ErrDecodingFailure, types.ErrInvalidNetworkConfig, types.ErrInvalidEnvironmentVariables, types.ErrIncompatibleCNIVersion:
		status = http.StatusBadRequest
	case types.ErrTryAgainLater, types.ErrPluginNotAvailable:
		status = http.StatusServiceUnavailable
	}
	b, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
