# frozen_string_literal: true

# tracer_agent: lets the `tracer` client attach to this process. Loading it installs a SIGURG
# handler and nothing else; the agent starts work only when a client attaches.
require_relative 'tracer_agent/version'
require_relative 'tracer_agent/tracer_agent'
require_relative 'tracer_agent/wrap'

module TracerAgent
  AGENT_THREADS = %w[tracer-agent tracer-eval tracer-listener].freeze

  class << self
    # Set to false to refuse -e, --heapdump and --backtraces (or TRACER_AGENT_EVAL=0).
    attr_writer :allow_eval

    def eval_allowed?
      return false if ENV['TRACER_AGENT_EVAL'] == '0'

      @allow_eval != false
    end

    # tracer --exec started this program, or the program that started this one, with
    # TRACER_AGENT_CONNECT=@NAME: connects to the tracer listening at @NAME now, as the agent
    # loads (or in a child, as fork returns), and returns only once tracing has begun, so that
    # the program is traced from its first line. The variable stays, for a program that execs
    # another (bundle exec), the Ruby programs it spawns and its forks: tracer takes the
    # program's descendants, and nobody listens any more once it has ended.
    def __connect_from_env
      addr = ENV['TRACER_AGENT_CONNECT']
      __connect(addr) if addr&.start_with?('@')
    end

    # Whether YJIT compiles this process's code now (the client says what a mode would cost it).
    def __yjit?
      defined?(RubyVM::YJIT) && RubyVM::YJIT.respond_to?(:enabled?) ? RubyVM::YJIT.enabled? : false
    end

    # How many Ractors the process runs: calls in any but the main one are not traced.
    def __ractors
      defined?(Ractor) && Ractor.respond_to?(:count) ? Ractor.count : 1
    end

    # Called by the agent in a thread of its own; returns the String sent back to the client.
    # fd: the heap dump's file, which the client made and passed over the socket (kind 1).
    def __eval(kind, text, fd = nil)
      case kind
      when 0 then TOPLEVEL_BINDING.eval(text, '(tracer -e)').inspect
      when 1 then heapdump(fd)
      when 2 then backtraces
      end
    end

    private

    # Writes into the file the client made (it belongs to whoever asked, and it may live where
    # this process cannot even see: another user's directory, another mount namespace). The
    # agent owns fd and closes it after this returns, whatever happens here: autoclose off.
    # sync: nothing stays buffered in the IO, which its finalizer could otherwise flush later
    # into whatever reuses the descriptor's number after a failed write.
    def heapdump(fd)
      io = IO.for_fd(fd, 'w', autoclose: false)
      io.binmode
      io.sync = true
      require 'objspace'
      GC.start
      ObjectSpace.dump_all(output: io)
      io.stat.size.to_s
    end

    def backtraces
      Thread.list.reject { |t| AGENT_THREADS.include?(t.name) }.map do |t|
        name = t.name || (t == Thread.main ? 'main' : t.inspect)
        lines = (t.backtrace || []).map { |l| "  #{l}" }
        ["#{name} (#{t.status || 'dead'})", *lines].join("\n")
      end.join("\n\n")
    end
  end

  # A later Signal.trap('URG') by the app replaces our handler; put ours back in front of it,
  # calling the app's handler after ours, so both keep working.
  module TrapHook
    def trap(signal, *args, &block)
      previous = super
      TracerAgent.__rearm_signal if [:URG, 'URG', 'SIGURG', :SIGURG, Signal.list['URG']].include?(signal)
      previous
    end
  end
  Signal.singleton_class.prepend(TrapHook)
  Kernel.singleton_class.prepend(TrapHook)
  Kernel.prepend(TrapHook)

  # Every fork Ruby makes (Kernel#fork, Process.fork, IO.popen('-'), Process.daemon) goes
  # through Process._fork: a child of a program tracer --exec started connects before its first
  # line, as the program did.
  module ForkHook
    def _fork
      pid = super
      TracerAgent.__connect_from_env if pid.zero?
      pid
    end
  end
  Process.singleton_class.prepend(ForkHook)
end

TracerAgent.__connect_from_env
