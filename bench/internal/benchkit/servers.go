package benchkit

import (
	"fmt"
	"os/exec"
	"strings"
)

// BridgeConfig renders the part of cmd/bridge's YAML config that the
// benchmarks share: warnings only in the log, the data directory, the HTTP
// listener, one MQTT listener, and one account that may publish to the
// filters in publish (the embedded broker lets only configured users
// publish). Everything else is the bridge's default; a benchmark appends
// its own sections (sinks, routes). If the bridge's config schema moves,
// this is the one place to adjust.
func BridgeConfig(mqttAddr, httpAddr, dataDir, user, passwordHash string, publish ...string) string {
	quoted := make([]string, len(publish))
	for i, f := range publish {
		quoted[i] = fmt.Sprintf("%q", f)
	}
	return fmt.Sprintf(`log:
  level: warn
data_dir: %q
http:
  address: %q
broker:
  listeners:
    - name: mqtt
      type: tcp
      address: %q
  users:
    - username: %q
      password_hash: %q
      publish: [%s]
`, dataDir, httpAddr, mqttAddr, user, passwordHash, strings.Join(quoted, ", "))
}

// MosquittoVersion returns e.g. "mosquitto version 2.0.11".
func MosquittoVersion(bin string) string {
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}
