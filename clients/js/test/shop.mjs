// The document the tests serve, and a token published here on purpose:
// never a real one.
export const TOKEN = "js-client-tests-0123456789abcdef";

export const SHOP = `
server: {host: 127.0.0.1, port: 8080}
admin:
  host: 127.0.0.1
  port: 8081
  tokens:
    - {name: tests, group: admin, token: ${TOKEN}}
proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9
    mocks:
      - name: orders
        request: {method: POST, url: "^/orders$"}
        response: {status: 201, json: '{"created": true}'}
        proxy:
          loss:
            percentage: 1.0
            status: 503
            retry_after: 1
            when: {count: {first: 2}, per: {header: Idempotency-Key}}
      - name: catalog
        request: {method: GET, url: "^/catalog$"}
        response: {status: 200, body: catalog}
`;
