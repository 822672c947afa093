package config

import (
	"path/filepath"
)

// TLS makes the proxy listener serve HTTPS (SPEC §17.7): with a
// certificate the user has (cert and key), or with one Doppel makes under
// a CA of its own (auto).
type TLS struct {
	Cert     Path `yaml:"cert,omitempty" doc:"A PEM file holding the listener's certificate chain, the leaf first. Read again when it changes. Goes with key; exclusive with auto."`
	Key      Path `yaml:"key,omitempty" doc:"A PEM file holding the certificate's private key (PKCS #8, PKCS #1 or SEC 1, unencrypted). Read again when it changes. Goes with cert; exclusive with auto."`
	Auto     bool `yaml:"auto,omitempty" doc:"true: Doppel makes a CA of its own and a certificate for the listener's host on first start, keeps them in state_dir, and writes the CA certificate to ca_file for clients to trust. Exclusive with cert and key."`
	CAFile   Path `yaml:"ca_file,omitempty" doc:"With auto: where the CA certificate (never a key) is written for clients to trust. Defaults to doppel-ca.pem beside the configuration file (with a database, in $XDG_STATE_HOME/doppel, else ~/.local/state/doppel)."`
	StateDir Path `yaml:"state_dir,omitempty" doc:"With auto: the directory (mode 0700) keeping the CA and the certificate, with their keys (mode 0600), across restarts. Defaults to .doppel-tls beside the configuration file (with a database, $XDG_STATE_HOME/doppel, else ~/.local/state/doppel)."`
}

// Defaults of auto's files: beside the configuration file, or in the state
// home when there is none (a database store).
const (
	DefaultCAFile   = "doppel-ca.pem"
	DefaultStateDir = ".doppel-tls"
)

// AutoFiles are where auto keeps its state and writes the CA certificate:
// what the document says, else beside the configuration file at
// configPath, else in stateHome ($XDG_STATE_HOME/doppel), where both are
// kept. Either is "" when none of them is known.
func (t *TLS) AutoFiles(configPath, stateHome string) (caFile, stateDir string) {
	caFile, stateDir = string(t.CAFile), string(t.StateDir)
	switch {
	case configPath != "":
		dir := filepath.Dir(configPath)
		if caFile == "" {
			caFile = filepath.Join(dir, DefaultCAFile)
		}
		if stateDir == "" {
			stateDir = filepath.Join(dir, DefaultStateDir)
		}
	case stateHome != "":
		if caFile == "" {
			caFile = filepath.Join(stateHome, DefaultCAFile)
		}
		if stateDir == "" {
			stateDir = stateHome
		}
	}
	return caFile, stateDir
}

// validateTLS is V45 (cert and key, or auto) and V46 (ca_file and
// state_dir belong to auto) at server.tls.
func validateTLS(t *TLS) []Violation {
	if t == nil {
		return nil
	}
	const at = "server.tls"
	var vs []Violation
	add := func(rule, key, msg string) {
		path := at
		if key != "" {
			path += "." + key
		}
		vs = append(vs, Violation{Rule: rule, Path: path, Message: msg})
	}
	switch {
	case t.Auto && (t.Cert != "" || t.Key != ""):
		add("V45", "auto", "auto: true makes a certificate, and cert and key name one; keep either cert and key, or auto")
	case t.Cert != "" && t.Key == "":
		add("V45", "key", "is required with cert: the PEM file holding the certificate's private key")
	case t.Key != "" && t.Cert == "":
		add("V45", "cert", "is required with key: the PEM file holding the certificate chain, leaf first")
	case !t.Auto && t.Cert == "" && t.Key == "":
		add("V45", "", "needs cert and key (PEM files), or auto: true; leave server.tls out to serve plain HTTP")
	}
	if !t.Auto {
		if t.CAFile != "" {
			add("V46", "ca_file", "applies only with auto: true, where Doppel writes its own CA certificate; with cert and key, clients trust the CA that issued cert")
		}
		if t.StateDir != "" {
			add("V46", "state_dir", "applies only with auto: true, where Doppel keeps the certificates it makes")
		}
	}
	return vs
}
