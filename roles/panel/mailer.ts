/**
 * Outgoing mail over SMTP (`mail.*` of the config) through nodemailer: the welcome mail of a new
 * account and `hostkit panel mail test`. Sending never blocks or fails the action that caused it;
 * a failure is logged with the SMTP server's answer.
 */
import { createTransport } from 'nodemailer';
import type { PanelConfig } from '../../src/contracts/types.ts';

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  /** Sends one mail; rejects with the SMTP error. */
  send(mail: Mail): Promise<void>;
}

/** Creates the transport once per process (connections are opened per message). */
export function createMailer(config: Readonly<PanelConfig['mail']>): Mailer {
  const transport = createTransport({
    host: config.host,
    port: config.port,
    secure: config.secure,
    ...(config.username !== '' ? { auth: { user: config.username, pass: config.password } } : {}),
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  });
  return {
    async send(mail) {
      try {
        await transport.sendMail({ from: config.from, to: mail.to, subject: mail.subject, text: mail.text });
      } catch (err) {
        // A bare `connect ECONNREFUSED 127.0.0.1:25` does not say it was the mail server.
        throw new Error(`the SMTP server ${config.host}:${config.port} (mail.host, mail.port) did not take the mail: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
    },
  };
}
