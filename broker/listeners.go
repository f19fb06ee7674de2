package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// listen opens the socket for one configured listener, broker.listeners[i].
// We open sockets ourselves, rather than letting mochi do it, so that the
// bound address is known (tests listen on port 0) and a port in use fails
// New, not later. Its errors name the key, so that the command line can say
// which flag or variable set it.
func listen(i int, cfg ListenerConfig) (listeners.Listener, error) {
	key := fmt.Sprintf("broker.listeners[%d].", i)
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		var err error
		if tlsCfg, err = cfg.TLS.Server(); err != nil {
			return nil, &strictyaml.KeyError{Key: key + "tls", Err: fmt.Errorf("listener %s: %w", cfg.Name, err)}
		}
	}
	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, &strictyaml.KeyError{Key: key + "address", Err: fmt.Errorf("listener %s: %w", cfg.Name, err)}
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	if cfg.Type == ListenerWebSocket {
		return newWebSocketListener(cfg.Name, ln), nil
	}
	return listeners.NewNet(cfg.Name, ln), nil
}

// webSocketListener serves MQTT over WebSocket (subprotocol "mqtt", any path)
// on a socket we opened. mochi's own WebSocket listener binds its address
// itself, which would hide the port from tests.
type webSocketListener struct {
	id       string
	ln       net.Listener
	server   *http.Server
	upgrader websocket.Upgrader
	log      *slog.Logger

	mu        sync.Mutex
	establish listeners.EstablishFn
	closed    bool
}

func newWebSocketListener(id string, ln net.Listener) *webSocketListener {
	l := &webSocketListener{
		id: id,
		ln: ln,
		upgrader: websocket.Upgrader{
			Subprotocols: []string{"mqtt"},
			// Browsers on any origin may subscribe: the bus is read-only for
			// anonymous clients, and publishers need credentials anyway.
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
	// The upgrade request is read before authentication: bound its time and size.
	l.server = &http.Server{Handler: http.HandlerFunc(l.handle), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	return l
}

func (l *webSocketListener) ID() string       { return l.id }
func (l *webSocketListener) Address() string  { return l.ln.Addr().String() }
func (l *webSocketListener) Protocol() string { return "ws" }

func (l *webSocketListener) Init(log *slog.Logger) error {
	l.log = log
	return nil
}

func (l *webSocketListener) Serve(establish listeners.EstablishFn) {
	l.mu.Lock()
	l.establish = establish
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return
	}
	if err := l.server.Serve(l.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		l.log.Error("websocket listener stopped", "listener", l.id, "error", err)
	}
}

func (l *webSocketListener) handle(w http.ResponseWriter, r *http.Request) {
	c, err := l.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has already answered with an HTTP error
	}
	defer c.Close()
	l.mu.Lock()
	establish := l.establish
	l.mu.Unlock()
	if err := establish(l.id, &wsConn{Conn: c.NetConn(), ws: c}); err != nil {
		l.log.Debug("websocket client ended", "listener", l.id, "error", err)
	}
}

func (l *webSocketListener) Close(closeClients listeners.CloseFn) {
	l.mu.Lock()
	already := l.closed
	l.closed = true
	l.mu.Unlock()
	if !already {
		// Shutdown stops accepting; hijacked WebSocket connections are closed by closeClients.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = l.server.Shutdown(ctx)
		cancel()
	}
	closeClients(l.id)
}

// wsConn presents a WebSocket as the byte stream mochi reads MQTT packets from.
// An MQTT packet may span WebSocket messages and a message may hold several
// packets, so reads continue across message boundaries.
type wsConn struct {
	net.Conn
	ws *websocket.Conn
	r  io.Reader // the current message, nil between messages

	writeMu sync.Mutex
}

func (c *wsConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			op, r, err := c.ws.NextReader()
			if err != nil {
				return 0, err
			}
			if op != websocket.BinaryMessage {
				return 0, errors.New("websocket: MQTT needs binary messages")
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
