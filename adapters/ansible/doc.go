// Package ansible is the bridge's intake for the Ansible callback plugin
// (collection/plugins/callback/firehose.py, also callback_plugins/firehose.py): POST /ansible/v1/events takes one event or
// a JSON array of them, validates each against payloads/ansible, and
// publishes each event's own bytes, minus its event_id (the de-duplication
// id), on the OpenStack firehose's topics:
//
//	ansible/playbook/<playbook_id>/action/start
//	ansible/playbook/<playbook_id>/action/finish/<OK|FAILED>
//	ansible/playbook/<playbook_id>/stats/<ansible_host>
//	ansible/playbook/<playbook_id>/task/<ansible_host>/<status>
//
// A request is all or nothing: one bad event gets a 400 naming its index and
// field, and nothing of the request is published. As in the firehose schema,
// stats and finish events carry no ansible_type; payloads/ansible tells them
// apart.
//
// It must not re-encode events (subscribers get the plugin's JSON as it was
// sent, with only the event_id member cut out), make topics by hand, or talk to a broker other than through
// bus.Publisher.
package ansible
