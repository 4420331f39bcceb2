// Certificates for TLS tests, made by the openssl command.
import assert from 'node:assert/strict';
import path from 'node:path';
import { run } from './proc.mjs';

// A self-signed certificate (its own CA) named `name` in dir, for
// altName (default the address 127.0.0.1), valid for `days`, with an RSA
// key unless `newKey` says otherwise; resolves to { cert, key }.
export async function selfSigned(dir, name, altName = 'IP:127.0.0.1', { days = 1, newKey = ['-newkey', 'rsa:2048'] } = {}) {
  const cert = path.join(dir, `${name}.pem`), key = path.join(dir, `${name}.key.pem`);
  const r = await run('openssl', ['req', '-x509', ...newKey, '-nodes', '-keyout', key, '-out', cert,
    '-days', String(days), '-subj', `/CN=${name}`, '-addext', `subjectAltName=${altName}`]);
  assert.equal(r.code, 0, r.stderr);
  return { cert, key };
}
