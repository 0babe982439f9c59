// Pins every listen() to 127.0.0.1, so a server that binds all interfaces
// by default stays on loopback in tests.
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  // With PLUMBLINE_LOOPBACK_REPORT set, the port bound (PORT=0: the OS's
  // choice) is said on stderr, so a test need not pick one beforehand.
  if (process.env.PLUMBLINE_LOOPBACK_REPORT) {
    this.once('listening', () => {
      process.stderr.write(`plumbline-loopback: listening on 127.0.0.1:${this.address().port}\n`);
    });
  }
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const cb = args.find((a) => typeof a === 'function');
    return listen.call(this, { port, host: '127.0.0.1' }, cb);
  }
  if (args[0] && typeof args[0] === 'object' && !Array.isArray(args[0])) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  return listen.apply(this, args);
};
