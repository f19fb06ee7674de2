package app

import (
	"github.com/opsfirehose/firehose/dashboard"
	"github.com/opsfirehose/firehose/history"
)

// newDashboard builds the page at / and its read API. It reads the bus as an
// anonymous subscriber of the embedded broker would, so it shows bus data
// only when anonymous clients may read; in external mode it shows Health.
func (b *Bridge) newDashboard() (*dashboard.Dashboard, error) {
	cfg := b.cfg
	opts := dashboard.Options{
		Gatherer:   b.registry,
		Registerer: b.registry,
		Logger:     b.log,
		Prefixes: dashboard.Prefixes{
			Chef: cfg.Chef.TopicPrefix, Ansible: cfg.Ansible.TopicPrefix, ConfigDB: cfg.ConfigDB.TopicPrefix,
			Gerrit: cfg.Gerrit.TopicPrefix, Launchpad: cfg.Launchpad.TopicPrefix, Subunit: cfg.Subunit.TopicPrefix,
		},
	}
	for _, r := range cfg.Routes {
		opts.Routes = append(opts.Routes, dashboard.Route{Name: r.Name, Sink: r.Sink, Required: r.Required})
	}
	opts.SinkReasons = func() map[string]string {
		reasons := map[string]string{}
		for _, st := range b.router.Status() {
			if !st.Ready {
				reasons[st.Route] = st.Reason
			}
		}
		return reasons
	}
	switch {
	case b.broker == nil:
		opts.Unavailable = "The bridge publishes to an external broker (broker.mode: external), which the dashboard does not read: " +
			"subscribe to it with bridge sub --url or mosquitto_sub. Health shows this bridge."
	case !cfg.Broker.AllowAnonymous:
		opts.Unavailable = "Anonymous MQTT clients may not read this bus (broker.allow_anonymous is false), " +
			"and the dashboard shows only what they may read. Health shows this bridge."
	default:
		opts.Source = b.broker
		if b.history != nil {
			opts.History = dashboardHistory{h: b.history, sync: new(history.Sync)}
		}
	}
	return dashboard.New(cfg.Dashboard, opts)
}
