# frozen_string_literal: true

# tracer_agent: lets the `tracer` client attach to this process. Loading it installs a SIGURG
# handler and nothing else; the agent starts work only when a client attaches.

# Loaded by tracer into a process still in Ruby's prelude (its thread tracer-inject runs while
# the main thread loads RubyGems, before the main script): a Ruby with YJIT built in (3.3 on,
# enabled or not) fills YJIT's method table when the prelude ends, from Kernel's own methods,
# and finds none once a module is prepended to Kernel, as the agent does: the process panics
# ("undefined optimized method!: nil?"). So the agent waits for the prelude to end.
unless Thread.current.equal?(Thread.main)
  sleep 0.01 while Thread.main.backtrace_locations&.any? { |l| l.path == '<internal:gem_prelude>' }
end
require_relative 'tracer_agent/version'
require_relative 'tracer_agent/wrap'
require_relative 'tracer_agent/repl'
require_relative 'tracer_agent/memory'

module TracerAgent
  # Threads of the agent's own, hidden from --backtraces; tracer-reaper waits for a --fork copy,
  # tracer-inject is the one that loaded the agent into a process that never required it.
  AGENT_THREADS = %w[tracer-agent tracer-eval tracer-listener tracer-reaper tracer-inject].freeze

  class << self
    # Set to false to refuse -e, -i, --heapdump, --backtraces and the other evals (or
    # TRACER_AGENT_EVAL=0).
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

    # The ActiveSupport::Notifications events that say what request or job a thread serves
    # (their payload's), for --top profile's tags: [start event, end event, the tag of a payload].
    PROFILE_TAGS = [
      ['start_processing.action_controller', 'process_action.action_controller',
       ->(payload) { "#{payload[:controller]}##{payload[:action]}" }],
      ['perform_start.active_job', 'perform.active_job', ->(payload) { payload[:job].class.name }]
    ].freeze

    # --top profile begins (on) or ends: while it runs, a thread's samples carry the request or
    # job it serves, where the app says so through ActiveSupport::Notifications (Rails' and
    # ActiveJob's own events); nothing is subscribed once it ends. In a thread of its own: the
    # agent's service may run in a postponed job, where Mutex#lock (which subscribe takes)
    # raises; each thread does whatever the last call wants.
    def __profile_tags(on)
      @profile_tags_want = on
      # Nothing to subscribe to, nothing to take back: no thread.
      return if on ? !defined?(ActiveSupport::Notifications) : @profile_tags.nil? && @profile_tags_lock.nil?

      @profile_tags_lock ||= Mutex.new
      Thread.new do
        Thread.current.name = 'tracer-agent'
        @profile_tags_lock.synchronize { profile_tags_now(@profile_tags_want) }
      end
    end

    private def profile_tags_now(on)
      if on && defined?(ActiveSupport::Notifications) && @profile_tags.nil?
        @profile_tags = PROFILE_TAGS.flat_map do |start, finish, tag|
          [ActiveSupport::Notifications.subscribe(start) { |*, payload| __tag_push(tag.call(payload)) },
           ActiveSupport::Notifications.subscribe(finish) { __tag_pop }]
        end
      elsif !on && @profile_tags
        @profile_tags.each { |s| ActiveSupport::Notifications.unsubscribe(s) }
        @profile_tags = nil
      end
    end

    # Whether YJIT compiles this process's code now (the client says what a mode would cost it).
    def __yjit?
      defined?(RubyVM::YJIT) && RubyVM::YJIT.respond_to?(:enabled?) ? RubyVM::YJIT.enabled? : false
    end

    # How many Ractors the process runs: calls in any but the main one are not traced.
    def __ractors
      defined?(Ractor) && Ractor.respond_to?(:count) ? Ractor.count : 1
    end

    # Called by the agent in a thread of its own, for each TRC_CMD_EVAL (its kinds are the
    # EVAL_ constants, from tracer_protocol.h); returns the String sent back to the client.
    # arg: the descriptor of the file a dump writes (the client made it and passed it over the
    # socket), or the Binding of an -i session.
    def __eval(kind, text, arg = nil)
      case kind
      when EVAL_CODE then TOPLEVEL_BINDING.eval(text, '(tracer -e)').inspect
      when EVAL_REPL then arg.eval(text, '(tracer -i)').inspect
      when EVAL_COMPLETE then Repl.complete?(text) ? 'complete' : 'incomplete'
      when EVAL_HEAPDUMP then heapdump(arg)
      when EVAL_SHAPESDUMP then shapesdump(arg)
      when EVAL_BACKTRACES then backtraces(frames(text))
      when EVAL_BACKTRACE then backtrace(frames(text))
      when EVAL_FORK then fork_stopped.to_s
      when EVAL_MEMORY then Memory.report
      else raise ArgumentError, "unknown eval kind #{kind}"
      end
    end

    # An -i session's Binding: the top level's self and locals, and locals of its own, which
    # neither the app's top level nor another session sees.
    def __binding = TOPLEVEL_BINDING.eval('binding')

    # fork, without the hooks apps put on Process._fork (Rails' and others' after-fork
    # callbacks, which reconnect, start threads...): the copies made here run none of the app's
    # code. Returns the child's pid in the parent, 0 in the child.
    def __fork
      return Process.fork || 0 unless Process.respond_to?(:_fork)

      m = Process.method(:_fork)
      m = m.super_method while m.owner != Process.singleton_class && m.super_method
      m.call
    end

    private

    def frames(text) = text.empty? ? nil : Integer(text, 10)

    # The file the client made (it belongs to whoever asked, and it may live where this process
    # cannot even see: another user's directory, another mount namespace), as an IO. The agent
    # owns fd and closes it after the dump returns, whatever happens there: autoclose off.
    # sync: nothing stays buffered in the IO, which its finalizer could otherwise flush later
    # into whatever reuses the descriptor's number after a failed write.
    def dump_file(fd)
      io = IO.for_fd(fd, 'w', autoclose: false)
      io.binmode
      io.sync = true
      io
    end

    def heapdump(fd)
      io = dump_file(fd)
      require 'objspace'
      GC.start
      ObjectSpace.dump_all(output: io)
      io.stat.size.to_s
    end

    def shapesdump(fd)
      require 'objspace'
      unless ObjectSpace.respond_to?(:dump_shapes)
        raise NotImplementedError, "this Ruby (#{RUBY_VERSION}) has no ObjectSpace.dump_shapes: " \
                                   'object shapes came with Ruby 3.2'
      end

      io = dump_file(fd)
      ObjectSpace.dump_shapes(output: io)
      io.stat.size.to_s
    end

    # frames: how many of each thread's innermost frames; nil for all.
    def backtraces(frames)
      Thread.list.reject { |t| AGENT_THREADS.include?(t.name) }.map do |t|
        name = t.name || (t == Thread.main ? 'main' : t.inspect)
        lines = app_frames(t, frames).map { |l| "  #{l}" }
        ["#{name} (#{t.status || 'dead'})", *lines].join("\n")
      end.join("\n\n")
    end

    # Where the main thread is now: its stack, not this thread's (`caller` here would be ours).
    def backtrace(frames)
      lines = app_frames(Thread.main, frames)
      lines.empty? ? '(the main thread has no Ruby frames)' : lines.join("\n")
    end

    SERVICE_FRAME = /[`'](?:TracerAgent\.)?__service'\z/

    # t's frames as the app's own: a thread that serves tracer right now (the service runs in
    # the frame of TracerAgent.__service, on whichever thread the VM picked, a sleeping main
    # thread too) shows where it was before, not the service.
    def app_frames(t, frames)
      lines = t.backtrace || []
      at = lines.index { |l| l =~ SERVICE_FRAME }
      lines = lines.drop(at + 1) if at
      frames ? lines.first(frames) : lines
    end

    # A copy of the process for gdb, stopped before it runs anything; it exits once continued
    # (kill -CONT, or gdb's detach). The stop is waited for, so the pid the client prints is
    # a stopped process already; a reaper thread then waits for its end.
    def fork_stopped
      pid = __fork
      if pid.zero?
        Process.kill(:STOP, Process.pid)
        exit!(0)
      end
      Process.wait(pid, Process::WUNTRACED)
      Process.detach(pid).name = 'tracer-reaper'
      pid
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
end

# The C library last: from the moment it loads, it answers clients (its SIGURG handler, its
# listener thread), and everything above must be there by then. tracer can load the agent into
# a running process, in a thread of its own, while other threads run: a client that rang in
# the middle of this file would have found TracerAgent half made.
require_relative 'tracer_agent/tracer_agent'
Signal.singleton_class.prepend(TracerAgent::TrapHook)
Kernel.singleton_class.prepend(TracerAgent::TrapHook)
TracerAgent.__box_copy(Kernel) # under Ruby::Box, what makes the prepend reach Object (wrap.c)
Kernel.prepend(TracerAgent::TrapHook)
Process.singleton_class.prepend(TracerAgent::ForkHook)

TracerAgent.__connect_from_env
