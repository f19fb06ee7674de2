package payloads_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opsfirehose/firehose/payloads/ansible"
)

// A consumer of the bus decodes each message it receives with the schema of
// its source. Here the message is a real one: the Ansible adapter's golden
// output for a task event, a line of topic, retain flag and payload as the
// bridge published it (a subscriber gets the same topic and payload from
// MQTT or NATS).
func Example() {
	line, err := os.ReadFile(filepath.Join("..", "adapters", "ansible", "testdata", "task-ok", "output.txt"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fields := bytes.SplitN(bytes.TrimSpace(line), []byte("\t"), 3)
	topic, payload := fields[0], fields[2]

	ev, err := ansible.Parse(payload)
	if err != nil {
		fmt.Println("not an Ansible event:", err) // a consumer drops or dead-letters it
		return
	}
	fmt.Printf("on %s\n", topic)
	fmt.Printf("%s %s on %s (playbook %s)\n", ev.Type, ev.Status, ev.AnsibleHost, ev.PlaybookID)
	// Output:
	// on ansible/playbook/ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d/task/alpha/OK
	// task OK on alpha (playbook ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d)
}
