// Package deploy holds no Go code: it is what runs firehose in production
// (systemd units, the .deb/.rpm definition, Prometheus alert rules, a Grafana
// dashboard), and its tests check those files with the tools that read them.
package deploy
