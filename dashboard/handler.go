package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/opsfirehose/firehose/httpserver"
)

//go:embed web
var webFiles embed.FS

// The page loads only its own files; nothing from another origin, no inline script.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Register adds the page and its API to mux.
func (d *Dashboard) Register(mux interface{ Handle(string, http.Handler) }) {
	web, _ := fs.Sub(webFiles, "web")
	assets := http.FileServerFS(web)
	mux.Handle("GET /{$}", secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, web, "index.html")
	})))
	mux.Handle("GET /assets/", secure(http.StripPrefix("/assets", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/index.html" || r.URL.Path == "/" {
			httpserver.WriteError(w, http.StatusNotFound, "no such asset: "+r.URL.Path, "")
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		assets.ServeHTTP(w, r)
	}))))
	mux.Handle("GET /api/v1/info", http.HandlerFunc(d.info))
	mux.Handle("GET /api/v1/stream", http.HandlerFunc(d.stream))
	mux.Handle("GET /api/v1/fleet", http.HandlerFunc(d.fleetHandler))
	mux.Handle("GET /api/v1/ansible", http.HandlerFunc(d.ansibleHandler))
	mux.Handle("GET /api/v1/changes", http.HandlerFunc(d.changesHandler))
	mux.Handle("GET /api/v1/health", http.HandlerFunc(d.healthHandler))
}

func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// Info is what the page asks first: whether it may show bus data, and each
// view's live filters.
type Info struct {
	Available   bool                `json:"available"`
	Unavailable string              `json:"unavailable,omitempty"`
	Filters     map[string][]string `json:"filters"`
}

func (d *Dashboard) info(w http.ResponseWriter, _ *http.Request) {
	httpserver.WriteJSON(w, http.StatusOK, Info{
		Available: d.opts.Source != nil, Unavailable: d.opts.Unavailable, Filters: d.filters,
	})
}

func (d *Dashboard) fleetHandler(w http.ResponseWriter, r *http.Request) {
	if !d.available(w) {
		return
	}
	d.settle(r.Context())
	q := r.URL.Query()
	fq := FleetQuery{Org: q.Get("org"), PolicyGroup: q.Get("policy_group"), Status: q.Get("status"), Search: q.Get("q"), Limit: 200}
	var ok bool
	if fq.Offset, ok = intParam(w, q.Get("offset"), "offset", 0, 1<<30); !ok {
		return
	}
	if fq.Limit, ok = intParam(w, q.Get("limit"), "limit", 200, 2000); !ok {
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, d.fleet.query(fq))
}

// intParam reads an optional integer query parameter in [0, max].
func intParam(w http.ResponseWriter, s, name string, def, max int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > max {
		httpserver.WriteError(w, http.StatusBadRequest, name+": must be a whole number from 0 to "+strconv.Itoa(max), name)
		return 0, false
	}
	return n, true
}

func (d *Dashboard) ansibleHandler(w http.ResponseWriter, r *http.Request) {
	if !d.available(w) {
		return
	}
	d.settle(r.Context())
	limit, ok := intParam(w, r.URL.Query().Get("limit"), "limit", 20, maxPlays)
	if !ok {
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, d.plays.snapshot(limit))
}

func (d *Dashboard) changesHandler(w http.ResponseWriter, r *http.Request) {
	if !d.available(w) {
		return
	}
	d.settle(r.Context())
	httpserver.WriteJSON(w, http.StatusOK, d.changes.snapshot())
}

func (d *Dashboard) healthHandler(w http.ResponseWriter, _ *http.Request) {
	if d.opts.Gatherer == nil {
		httpserver.WriteError(w, http.StatusNotFound, "no metrics registry", "")
		return
	}
	families, err := d.opts.Gatherer.Gather()
	if err != nil && len(families) == 0 {
		httpserver.WriteError(w, http.StatusInternalServerError, "gather metrics: "+err.Error(), "")
		return
	}
	h := health(families, d.opts.Routes, time.Now().UnixMilli())
	if d.opts.SinkReasons != nil {
		reasons := d.opts.SinkReasons()
		for i := range h.Routes {
			if !h.Routes[i].SinkUp {
				h.Routes[i].SinkReason = reasons[h.Routes[i].Name]
			}
		}
	}
	httpserver.WriteJSON(w, http.StatusOK, h)
}
