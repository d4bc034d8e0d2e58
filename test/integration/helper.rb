# helper.rb: starts target processes with the agent and runs the real tracer client against them.
require 'minitest/autorun'
require 'etc'
require 'open3'
require 'timeout'
require 'json'
require 'tmpdir'
require 'fileutils'

ROOT = File.expand_path('../..', __dir__)
TRACER = File.join(ROOT, 'client', 'tracer')
TARGET = File.join(ROOT, 'test', 'apps', 'target.rb')
# Generous: a loaded 2-core machine is slow, never flaky. At load 30 (other test runs, builds),
# ActiveRecord's example app took over 30 s to run once. Only a failing wait takes this long.
WAIT = Float(ENV['TEST_WAIT'] || 90)
# The Ruby under test: the one running the tests (make test RUBY=...), never whatever `ruby` is
# first in PATH. `make check-memory` puts a wrapper here.
RUBY = ENV['TRACER_TEST_RUBY'] || RbConfig.ruby
# The wire protocol's version, read from the header both halves are built from.
PROTOCOL_VERSION = Integer(File.read(File.join(ROOT, 'include', 'tracer_protocol.h'))[/#define TRC_PROTOCOL_VERSION (\d+)/, 1])
# Where targets load the agent from: `make check-memory` points it at an ASan build.
AGENT_LIB = ENV['TRACER_AGENT_LIB'] || File.join(ROOT, 'lib')

# A run started in the background by a shell without job control (`make test &`, nohup, a
# script) ignores SIGINT and SIGQUIT (and nohup SIGHUP), and so would every process the tests
# start: a SIGINT a test sends a client before its handler is in place, or one tracer -x passes
# on to its program, would then be lost. The tests start them as a terminal would.
{ 'INT' => 'DEFAULT', 'QUIT' => 'SYSTEM_DEFAULT', 'HUP' => 'SYSTEM_DEFAULT' }.each do |sig, handler|
  was = trap(sig, handler)
  trap(sig, was) unless was == 'IGNORE'
end

# What a process of user nobody runs (a target, the client), where nobody can read it: the
# checkout itself, or, when nobody cannot (a clone under /root, which is 0700), a copy of the
# agent, the test apps and the client in a directory of its own, made once per run.
module Nobody
  AS = %w[setpriv --reuid=nobody --regid=nogroup --clear-groups].freeze

  def self.dir
    @dir ||= if system(*AS, 'test', '-r', TARGET, '-a', '-x', TRACER, '-a', '-r', File.join(AGENT_LIB, 'tracer_agent.rb'))
               nil
             else
               copy
             end
  end

  def self.copy = Checkout.copy('tracer-nobody')

  # path (under ROOT, or AGENT_LIB) as nobody can read it.
  def self.path(path) = dir ? Checkout.path(dir, path) : path

  def self.prefix?(prefix) = prefix[0, AS.size] == AS
end

# A copy of what a target and the client need (the agent's lib, the test apps, the client),
# for a process that cannot see the checkout where it is.
module Checkout
  # A new directory (under base, else Dir.tmpdir) holding the copy, removed at exit.
  def self.copy(prefix, base = nil)
    d = Dir.mktmpdir(prefix, base)
    File.chmod(0o755, d)
    FileUtils.cp_r(File.expand_path(AGENT_LIB), File.join(d, 'lib'))
    FileUtils.mkdir_p(File.join(d, 'test'))
    FileUtils.cp_r(File.join(ROOT, 'test', 'apps'), File.join(d, 'test', 'apps'))
    FileUtils.mkdir_p(File.join(d, 'client'))
    FileUtils.cp(TRACER, File.join(d, 'client', 'tracer'))
    FileUtils.chmod_R('a+rX', d)
    at_exit { FileUtils.rm_rf(d) }
    d
  end

  # path (under ROOT, or AGENT_LIB) in the copy in dir.
  def self.path(dir, path)
    lib = File.expand_path(AGENT_LIB)
    path.start_with?(lib) ? File.join(dir, 'lib', path.delete_prefix(lib)) : File.join(dir, path.delete_prefix(ROOT))
  end

  # Whether path is where a private /tmp (systemd's PrivateTmp) hides it.
  def self.under_tmp?(path) = "#{File.realpath(path)}/".start_with?('/tmp/')
end

# A Ruby process running test/apps/target.rb MODE with the agent loaded.
class Target
  attr_reader :pid, :out

  def initialize(mode, env: {}, agent: true, script: TARGET, prefix: [], chdir: nil, ready: nil, lib: AGENT_LIB)
    # agent: false is a process without our lib/ at all (it may load an installed gem itself).
    # prefix: a command to run the target under (unshare ...), which execs it, or forks it:
    # then pid is the prefix's, and the target, which says its own pid, is its child.
    # chdir: its working directory (a relative script is found from there).
    # ready: what a script other than target.rb prints once it is ready.
    # lib: where it loads the agent from (a copy of AGENT_LIB).
    args = prefix + [RUBY]
    lib = File.expand_path(lib)
    lib, script = Nobody.path(lib), Nobody.path(script) if Nobody.prefix?(prefix)
    args += ["-I#{lib}", '-rtracer_agent'] if agent
    @out, @err = +'', +''
    @stdin, @stdout, @stderr, @wait = Open3.popen3(env, *args, script, mode, **(chdir ? { chdir: chdir } : {}))
    @pid = @wait.pid
    @readers = [Thread.new { @stdout.each_line { |l| @out << l } }, Thread.new { @stderr.each_line { |l| @err << l } }]
    wait_for(ready || (prefix.empty? ? /ready #{@pid}/ : /ready \d+/)) { "target #{mode} did not start: #{@err}" }
  end

  def wait_for(re, within: WAIT)
    deadline = Time.now + within
    sleep 0.01 until @out =~ re || Time.now > deadline || !alive?
    raise(block_given? ? yield : "no #{re.inspect} in target output: #{@out}#{@err}") unless @out =~ re
  end

  def err = @err

  # A line to the target's stdin (the apps that take commands read it).
  def puts(line)
    @stdin.puts(line)
    @stdin.flush
  end

  def alive?
    @wait.alive?
  end

  def kill(sig = 'KILL')
    Process.kill(sig, @pid) if alive?
  rescue Errno::ESRCH
    nil # it exited (and was reaped) between alive? and kill
  ensure
    @wait.join(WAIT)
  end

  def status = @wait.value
end

# One run of the client in the background; its output is collected as it comes.
class Client
  attr_reader :out, :err

  def initialize(*args, chdir: nil)
    @out, @err = +'', +''
    @lines = Queue.new
    @stdin, @stdout, @stderr, @wait = Open3.popen3(TRACER, *args.map(&:to_s), **(chdir ? { chdir: chdir } : {}))
    @stdin.close
    @readers = [Thread.new { @stdout.each_line { |l| @out << l } }, Thread.new do
      @stderr.each_line do |l|
        @lines << [now, l]
        @err << l
      end
    end]
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # When (CLOCK_MONOTONIC) a line of stderr (the notes: attached, detached) that matches re
  # came, as soon as it could be read: earlier than a wait_for that polls for it saw it, on a
  # loaded machine by much. nil if none came.
  def came_at(re)
    @came ||= []
    @came << @lines.pop until @lines.empty?
    @came.find { |_, l| l =~ re }&.first
  end

  def pid = @wait.pid

  def wait_for(re, within: WAIT, stream: :both)
    deadline = Time.now + within
    text = -> { stream == :out ? @out : stream == :err ? @err : @out + @err }
    sleep 0.01 until text.call =~ re || Time.now > deadline || (!@wait.alive? && @readers.none?(&:alive?))
    text.call =~ re or raise "no #{re.inspect} in client output:\n--- stdout\n#{@out}\n--- stderr\n#{@err}"
    Regexp.last_match
  end

  def signal(sig) = Process.kill(sig, pid)

  # Waits for the client to exit; returns its Process::Status.
  def finish(within: WAIT)
    @wait.join(within) or raise "client did not exit:\n#{@out}\n#{@err}"
    @readers.each { |t| t.join(within) }
    @wait.value
  end

  def kill
    Process.kill('KILL', pid) rescue nil
    @wait.join(WAIT)
  end
end

module TracerTest
  def setup
    @targets = []
    @clients = []
  end

  def teardown
    @clients.each(&:kill)
    @targets.each(&:kill)
  end

  def target(mode, **opts)
    Target.new(mode, **opts).tap { |t| @targets << t }
  end

  def client(*args, **opts)
    Client.new(*args, **opts).tap { |c| @clients << c }
  end

  # Runs the client to completion: [stdout, stderr, status]. prefix: a command to run it under.
  # A client still running after `within` is killed, and the test fails: it never outlives it.
  def tracer(*args, within: WAIT, env: {}, prefix: [], chdir: nil)
    client = Nobody.prefix?(prefix) ? Nobody.path(TRACER) : TRACER
    Open3.popen3(env, *prefix, client, *args.map(&:to_s), **(chdir ? { chdir: chdir } : {})) do |stdin, stdout, stderr, wait|
      stdin.close
      readers = [Thread.new { stdout.read }, Thread.new { stderr.read }]
      unless wait.join(within)
        Process.kill('KILL', wait.pid) rescue nil # rubocop:disable Style/RescueModifier
        wait.join
        flunk "tracer #{args.join(' ')} still ran after #{within} s:\n#{readers.map(&:value).join("\n")}"
      end
      [readers[0].value, readers[1].value, wait.value]
    end
  end

  # Runs the client until its standard output has what each of res matches, then ends it as
  # Ctrl-C would: [stdout, stderr, status]. In place of a fixed --duration, which a loaded
  # machine can let pass before the target made the calls a test reads.
  def run_until(*args, res, within: WAIT)
    c = client(*args)
    Array(res).each { |re| c.wait_for(re, within: within, stream: :out) }
    c.signal('INT')
    [c.out, c.err, c.finish(within: within)]
  end

  # A test that cannot work but as root (another user's processes, namespaces, a tmpfs) is
  # skipped as any other user, saying so: make test as another user runs the rest.
  def needs_root(why)
    skip "needs root: #{why}" unless Process.uid.zero?
  end

  # Runs a target as user nobody (setpriv execs it: the pid stays the target's).
  AS_NOBODY = Nobody::AS

  # The descriptors pid has open.
  def fds(pid) = Dir.children("/proc/#{pid}/fd")

  # How many of pid's descriptors are open on path.
  def holding(pid, path)
    fds(pid).count { |fd| (File.readlink("/proc/#{pid}/fd/#{fd}") rescue nil) == path }
  end

  def wait_until(within: WAIT, message: 'condition')
    deadline = Time.now + within
    until (v = yield)
      raise "timed out waiting for #{message}" if Time.now > deadline

      sleep 0.01
    end
    v
  end

  # What attaching to pid may have left: its queue, a listening socket named for it. For a
  # target in namespaces of its own, host is its pid here and pid the one it sees itself by
  # (its queue's key; a client inside names it so too); both are looked for where it lives.
  def leftovers_for(pid, host: nil)
    ipcs = host ? ['nsenter', '-t', host.to_s, '-i', 'ipcs', '-q'] : %w[ipcs -q]
    queues = IO.popen(ipcs, &:read).lines.grep(/0x#{format('%08x', 0x74000000 | (pid & 0xffffff))}/)
    names = [pid, host].compact.join('|')
    sockets = File.read("/proc/#{host || 'self'}/net/unix").lines.grep(/@tracer-\d+-(#{names})-/)
    queues + sockets
  end
end
