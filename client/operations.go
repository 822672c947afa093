package client

import (
	"fmt"
	"net/url"
	"strings"
)

// operation is one endpoint of the admin API as /openapi.json names it.
// Every call goes through one of these, and a test holds the list to the
// document a Doppel serves: an endpoint added, moved or renamed there
// fails it until the client follows.
type operation struct {
	id, method, path string
}

var (
	opListProxies    = operation{"listProxies", "GET", "/api/v1/proxies"}
	opCreateProxy    = operation{"createProxy", "POST", "/api/v1/proxies"}
	opReadProxy      = operation{"readProxy", "GET", "/api/v1/proxies/{name}"}
	opUpdateProxy    = operation{"updateProxy", "PUT", "/api/v1/proxies/{name}"}
	opDeleteProxy    = operation{"deleteProxy", "DELETE", "/api/v1/proxies/{name}"}
	opListTemplates  = operation{"listTemplates", "GET", "/api/v1/proxies/{name}/templates"}
	opUploadTemplate = operation{"uploadTemplatePut", "PUT", "/api/v1/proxies/{name}/templates/{file}"}
	opDeleteTemplate = operation{"deleteTemplate", "DELETE", "/api/v1/proxies/{name}/templates/{file}"}
	opListCounters   = operation{"listCounters", "GET", "/api/v1/proxies/{name}/counters"}
	opResetCounters  = operation{"resetCounters", "DELETE", "/api/v1/proxies/{name}/counters"}
	opRecordProxy    = operation{"recordProxy", "POST", "/api/v1/proxies/{name}/record"}
	opListSessions   = operation{"listSessions", "GET", "/api/v1/sessions"}
	opCreateSession  = operation{"createSession", "POST", "/api/v1/sessions"}
	opReadSession    = operation{"readSession", "GET", "/api/v1/sessions/{id}"}
	opUpdateSession  = operation{"updateSession", "PUT", "/api/v1/sessions/{id}"}
	opDeleteSession  = operation{"deleteSession", "DELETE", "/api/v1/sessions/{id}"}
	opReload         = operation{"reload", "POST", "/api/v1/config/reload"}
	opAccess         = operation{"access", "GET", "/api/v1/access"}
	opSchema         = operation{"schema", "GET", "/api/v1/schema"}
	opStatus         = operation{"status", "GET", "/api/v1/status"}
	opListReplicas   = operation{"listReplicas", "GET", "/api/v1/replicas"}
	opListRequests   = operation{"listRequests", "GET", "/api/v1/requests"}
	opClearRequests  = operation{"clearRequests", "DELETE", "/api/v1/requests"}
	opStreamRequests = operation{"streamRequests", "GET", "/api/v1/requests/stream"}
	opVerifyRequests = operation{"verifyRequests", "POST", "/api/v1/requests/verify"}
)

// operations are the endpoints the client calls.
var operations = []operation{
	opListProxies, opCreateProxy, opReadProxy, opUpdateProxy, opDeleteProxy,
	opListTemplates, opUploadTemplate, opDeleteTemplate, opListCounters, opResetCounters, opRecordProxy,
	opListSessions, opCreateSession, opReadSession, opUpdateSession, opDeleteSession,
	opReload, opAccess, opSchema, opStatus, opListReplicas,
	opListRequests, opClearRequests, opStreamRequests, opVerifyRequests,
}

// url is the operation's URL under base, each {…} of its path replaced
// by the next of params, escaped. An empty parameter is refused: the
// path would name another resource.
func (o operation) url(base *url.URL, params []string) (*url.URL, error) {
	var raw strings.Builder
	rest := o.path
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			raw.WriteString(rest)
			break
		}
		end := strings.IndexByte(rest, '}')
		raw.WriteString(rest[:open])
		name := rest[open+1 : end]
		rest = rest[end+1:]
		if len(params) == 0 {
			panic("operation " + o.id + ": no value for {" + name + "}")
		}
		if params[0] == "" {
			return nil, fmt.Errorf("the %s is empty", paramWords[name])
		}
		raw.WriteString(url.PathEscape(params[0]))
		params = params[1:]
	}
	u := *base
	u.RawPath = strings.TrimRight(base.EscapedPath(), "/") + raw.String()
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, err
	}
	u.Path = p
	return &u, nil
}

var paramWords = map[string]string{"name": "proxy name", "id": "session id", "file": "template file name"}
