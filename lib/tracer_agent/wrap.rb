# frozen_string_literal: true

module TracerAgent
  # Tells a left-out optional argument from a given one, in a wrapper's parameter defaults; an
  # -m expression that shows one shows (default).
  UNSET = Object.new.tap { |o| def o.inspect = '(default)' }.freeze

  # The value of an -m expression that raised: shown as #<Class: message>.
  class ExprFailure
    def initialize(error)
      @text = "#<#{error.class}: #{error.message}>"
    rescue Exception # rubocop:disable Lint/RescueException -- its #message may raise too
      @text = '#<exception (its message raised too)>'
    end

    def inspect = @text
  end

  # Wrap: how -m traces a method without any VM event hook. The method's entry is aliased
  # under a private name and a wrapper takes its name: a plain Ruby method, with the same
  # parameters, that tells the agent a call begins, calls the original, and tells it the call
  # ended (ensure). Removing it puts the original entry back, so nothing is left in the
  # method's place (the wrapper is kept aside, for the next session: kept_name): an enabled
  # TracePoint, even one targeted at a single method, leaves a YJIT process up to 6x slower for
  # good (measured on Ruby 3.4), while a wrapper costs only the calls of its own method, and
  # YJIT recompiles just the code that called it once it is gone.
  #
  # The agent (wrap.c) calls these with the GVL, from its service; they may raise, and it
  # rescues.
  module Wrap
    FILE = '(tracer wrapper)'
    # The agent's own Ruby: never wrapped, even when the app's directory holds it.
    OWN = File.expand_path('..', __dir__)
    OPERATORS = %w[+ - * / % ** == != < <= > >= <=> === =~ !~ ! ~ +@ -@ [] []= << >> & | ^ `].freeze
    # What in a Ruby method's bytecode may reach the block it was given: yield (in it or in a
    # block inside it), its &block parameter, super (which passes the block on), and the methods
    # that look at the caller's block or frame.
    # Keywords a parameter may be named after, but no local variable can be read by.
    RESERVED = %w[alias and begin BEGIN break case class def defined? do else elsif end END ensure
                  false for if in module next nil not or redo rescue retry return self super then
                  true undef unless until when while yield __FILE__ __LINE__ __ENCODING__].to_h { [_1.to_sym, true] }.freeze
    BLOCK_USE = /invokeblock|getblockparam|invokesuper|block_given\?|iterator\?|binding|\b(?:proc|lambda|Proc)\b|defined.*yield/

    class << self
      # Puts a wrapper around owner's method name. exprs: Ruby expressions to evaluate at each
      # call (the -m Class#method(expr, ...) list). The wrapper is the one an earlier session
      # made for the same method, parameters and expressions, if there is one (kept_name), or a
      # new one; TracerAgent.__bind tells the agent which method its slot stands for now.
      # Returns what uninstall needs.
      def install(owner, name, exprs)
        watch
        original = owner.instance_method(name)
        visibility = visibility_of(owner, name)
        saved = saved_name(owner, name)
        sig = signature(original)
        kept = kept_name(owner, name, sig, saved, exprs)
        slot = kept_slot(owner, kept)
        # The saved alias is private: a public one would show among the class's public methods
        # (Rails takes a controller's public methods for its actions).
        owner.send(:alias_method, saved, name)
        owner.send(:private, saved)
        begin
          bound = TracerAgent.__bind(slot || 0) or raise 'no slot left for another wrapper'
          if slot
            restore(owner, name, kept, visibility)
          else
            define(owner, name, bound, sig, saved, exprs, kept)
            owner.send(visibility, name) unless visibility == :public
          end
        rescue Exception # rubocop:disable Lint/RescueException
          restore(owner, name, saved, visibility)
          raise
        end
        [owner, name, saved, visibility]
      end

      # Where a wrapper is kept once its session has ended, as a private alias, so that the next
      # session that traces the method puts the same one back instead of compiling another:
      # YJIT keeps the code it compiled for every method it was given (measured with
      # test/bench/redefine_cost.rb on Ruby 3.4.5: 8.8 KiB a session for a new wrapper, 2.0
      # KiB for a kept one, which is what recompiling its callers costs). One per method,
      # parameters and expressions: the name carries a digest of the wrapper's source.
      def kept_name(owner, name, sig, saved, exprs)
        params, call = sig
        digest = ([params, call.call(saved)] + exprs).join("\0").hash % (1 << 60)
        :"#{saved.to_s.sub('__tracer_o', '__tracer_w')}_#{digest.to_s(36)}"
      end

      # The slot of the wrapper kept under kept (its line in FILE), or nil if there is none.
      def kept_slot(owner, kept)
        return nil unless owner.private_method_defined?(kept, false)

        file, line = owner.instance_method(kept).source_location
        file == FILE ? line : nil
      end

      # The original's private alias, which the wrapper calls. It stays after detach, for good:
      # the app may hold a wrapper it took while traced (obj.method(:m), instance_method(:m),
      # what Sinatra keeps of each route), and that must go on calling the original. One name
      # per method, so attaching again reuses it instead of adding another; the owner's id in
      # it, or a subclass's wrapper and its superclass's (reached through super) would call the
      # same name, which finds the subclass's original from both.
      def saved_name(owner, name)
        s = name.to_s
        s = s.match?(/\A[A-Za-z_][A-Za-z0-9_]*\z/) ? "o_#{s}" : "ox_#{s.unpack1('H*')}"
        :"__tracer_#{s}_#{owner.object_id}"
      end

      # Definitions reach the agent from now on: DefinitionWatch goes in front of Module once.
      def watch
        Module.prepend(DefinitionWatch) unless Module < DefinitionWatch
      end

      # Puts the original back, unless the app has redefined the method meanwhile. The saved
      # alias stays (saved_name).
      def uninstall(handle)
        return handle.disable if handle.is_a?(TracePoint)

        owner, name, saved, visibility = handle
        restore(owner, name, saved, visibility) if wrapper?(owner, name)
      end

      # The original back under its name, with its visibility. An alias takes its source's
      # visibility: the private saved alias gets the original's first, so that the name is never
      # private for an instant (another thread calling it then would get NoMethodError).
      def restore(owner, name, saved, visibility)
        owner.send(visibility, saved)
        owner.send(:alias_method, name, saved)
        owner.send(:private, saved)
      end

      # Whether owner's name is one of our wrappers, and which (its index), else nil.
      def wrapper_index(owner, name)
        file, line = owner.instance_method(name).source_location
        file == FILE ? line : nil
      rescue NameError
        nil
      end

      # Methods taken out of their class once defined, which only an UnboundMethod still holds:
      # Sinatra compiles each route ("GET /price/:name") so, and calls it with bind_call. No
      # method table has them, so no wrapper can take their place. Those named name, of owner
      # (nil: any), that no module defines under that name now.
      def detached(owner, name)
        found = []
        ObjectSpace.each_object(UnboundMethod) do |um|
          next unless um.name == name && (owner.nil? || um.owner.equal?(owner))
          next if own?(um.owner, name) || um.source_location&.first == FILE

          found << um unless found.any? { |f| f == um }
        rescue StandardError
          next
        end
        found
      end

      # Traces a detached method with a TracePoint on it alone. Ruby 3.1 keeps that method's
      # bytecode instrumented after the TracePoint is disabled (about 2x on a route block that
      # does nothing); Ruby 3.3 and later do not (measured: README, What stays behind).
      def trace_detached(um, token)
        tp = TracePoint.new(:call, :return) do |t|
          t.event == :call ? TracerAgent.__enter(token) : TracerAgent.__leave(token)
        end
        tp.enable(target: um)
        tp
      end

      # Every module with a method of this name of its own: [owner, ...], class methods included.
      def owners_of(name)
        found = []
        ObjectSpace.each_object(Module) do |mod|
          found << mod if own?(mod, name)
          found << mod.singleton_class if mod.singleton_methods(false).include?(name)
        rescue StandardError
          next # a module whose methods cannot be listed
        end
        found.uniq
      end

      # The app's own Ruby methods: each module's (and its class methods'), defined in a file under
      # one of prefixes, whose "Class#method" label no ignore regexp matches. A file loaded by a
      # relative path (`ruby app.rb`) is taken from cwd, the working directory with its '/' (nil:
      # unknown, such files are left out). Returns [owner, name, absolute path, line, ...] for the
      # agent.
      def app_methods(prefixes, cwd, ignores)
        ignore = ignores.empty? ? nil : Regexp.union(ignores.map { |r| Regexp.new(r) })
        found = []
        # Singleton classes come through ObjectSpace too: each module is seen once.
        ObjectSpace.each_object(Module) do |mod|
          next if refinement?(mod) || mod.singleton_class?

          collect(found, mod, mod.instance_methods(false) + mod.private_instance_methods(false), '#', prefixes, cwd, ignore)
          singles = mod.singleton_methods(false)
          collect(found, mod.singleton_class, singles, '.', prefixes, cwd, ignore) unless singles.empty?
        rescue StandardError
          next # a module that will not list its methods
        end
        detached_app(found, prefixes, cwd, ignore) if TRACE_DETACHED
        found
      end

      # The app's methods that only an UnboundMethod holds (Sinatra's routes) are traced with a
      # TracePoint on each, which Ruby 3.3 and later undo completely at detach; Ruby 3.1 leaves
      # such a method's bytecode instrumented (about 2x on the method's own code), so there
      # they are traced only when -m names them.
      TRACE_DETACHED = RUBY_VERSION >= '3.3'

      # [um, name, path, line] for each such method under prefixes: um in the owner's place.
      def detached_app(found, prefixes, cwd, ignore)
        ObjectSpace.each_object(UnboundMethod) do |um|
          file, line = um.source_location
          path = file && file != FILE ? absolute(file, cwd) : nil
          next if path.nil? || path.start_with?(OWN) || prefixes.none? { |p| path.start_with?(p) }
          next if own?(um.owner, um.name) || ignore&.match?("#{label_of(um.owner)}##{um.name}")
          next if found.each_slice(4).any? { |f, n| f.is_a?(UnboundMethod) && n == um.name && f == um }

          found.push(um, um.name, File.expand_path(path), line)
        rescue StandardError
          next
        end
      end

      # One method just defined: [absolute path, line] if it is the app's (as app_methods), else nil.
      def app_method(owner, name, prefixes, cwd, ignores)
        ignore = ignores.empty? ? nil : Regexp.union(ignores.map { |r| Regexp.new(r) })
        found = []
        collect(found, owner, [name], owner.singleton_class? ? '.' : '#', prefixes, cwd, ignore)
        found.empty? ? nil : found[2, 2]
      end

      private

      def refinement?(mod)
        defined?(::Refinement) && mod.is_a?(::Refinement)
      end

      # (instance_methods(false) also lists what modules prepended to owner define: only
      # owner's own methods are taken, where they are defined.)
      def collect(found, owner, names, sep, prefixes, cwd, ignore)
        names.each do |name|
          method = owner.instance_method(name)
          next unless method.owner.equal?(owner)

          file, line = method.source_location
          path = file && file != FILE ? absolute(file, cwd) : nil
          next if path.nil? || path.start_with?(OWN) || prefixes.none? { |p| path.start_with?(p) }
          next if ignore&.match?("#{label_of(owner)}#{sep}#{name}")

          found.push(owner, name, File.expand_path(path), line)
        end
      end

      # The file as the agent's scope sees it (scope.c): relative to cwd unless absolute; nil for
      # what is no file ("<internal:...>", "(eval)").
      def absolute(file, cwd)
        return file if file.start_with?('/')
        return nil if file.start_with?('<', '(') || cwd.nil?

        cwd + file.delete_prefix('./')
      end

      def label_of(owner)
        return owner.to_s unless owner.singleton_class?

        owner.inspect[/\A#<Class:(.*)>\z/, 1] || owner.inspect
      end

      def wrapper?(owner, name)
        !wrapper_index(owner, name).nil?
      end

      def own?(mod, name)
        mod.instance_methods(false).include?(name) || mod.private_instance_methods(false).include?(name)
      end

      def visibility_of(owner, name)
        if owner.private_method_defined?(name, false) then :private
        elsif owner.protected_method_defined?(name, false) then :protected
        else :public
        end
      end

      # The wrapper is compiled where the original lives (constants in expressions resolve as
      # they would there), and kept under kept as well; it reports with the token -slot, and
      # its source location is FILE:slot, which is how it is recognised. Defined under the
      # method's own name where Ruby allows it, which its frames then show.
      def define(owner, name, slot, sig, saved, exprs, kept)
        params, call = sig
        token = -slot
        enter = if exprs.empty? then "::TracerAgent.__enter(#{token})"
                else "::TracerAgent.__enter_with(#{token}) { [#{exprs.map { |e| expr(e) }.join(', ')}] }"
                end
        def_name = definable?(name) ? name : kept
        owner.class_eval(<<~RUBY, FILE, slot - 1)

          def #{def_name}(#{params})
            #{enter}
            #{call.call(saved)}
          ensure
            ::TracerAgent.__leave(#{token})
          end
        RUBY
        if def_name == name
          owner.send(:alias_method, kept, name)
        else
          owner.send(:alias_method, name, kept)
        end
        owner.send(:private, kept)
      end

      # An expression as Ruby code: its value, or what it raised.
      def expr(code)
        body = code == '__source__' ? "(__l = ::Kernel.caller_locations(3, 1)[0]) && \"\#{__l.path}:\#{__l.lineno}\"" : code
        RubyVM::InstructionSequence.compile("->{ #{body}\n}") # a syntax error shows as the value
        "begin\n#{body}\nrescue ::Exception => __e\n::TracerAgent::ExprFailure.new(__e)\nend"
      rescue SyntaxError => e
        "::TracerAgent::ExprFailure.new(::SyntaxError.new(#{e.message.lines.first.to_s.strip.inspect}))"
      end

      def definable?(name)
        s = name.to_s
        s.match?(/\A[A-Za-z_][A-Za-z0-9_]*[?!=]?\z/) || OPERATORS.include?(s)
      end

      # [parameter list, ->(callee) { call with the same arguments }], from the original's own
      # parameters: a call through the wrapper binds exactly what a direct call would, and
      # -m expressions see the parameters by their names.
      def signature(original)
        params = original.parameters
        # def m(...), and keywords named like `if:`, which no code can pass on by name
        if params == [%i[rest *], %i[keyrest **], %i[block &]] ||
           params.any? { |type, name| %i[key keyreq].include?(type) && RESERVED[name] }
          return ['...', ->(callee) { "#{callee}(...)" }]
        end

        seen = {}
        taken = params.filter_map { |_, name| [name, true] if name }.to_h
        defs = []
        pos = [] # [:req | :opt | :rest, name]
        kw = []  # [:req | :opt | :rest, name]
        block = nil
        params.each_with_index do |(type, name), i|
          local = local_name(type, name, i, seen, taken)
          case type
          when :req then defs << local.to_s; pos << [:req, local]
          when :opt then defs << "#{local} = ::TracerAgent::UNSET"; pos << [:opt, local]
          when :rest then defs << "*#{local}"; pos << [:rest, local]
          when :keyreq then defs << "#{name}:"; kw << [:req, name]
          when :key then defs << "#{name}: ::TracerAgent::UNSET"; kw << [:opt, name]
          when :keyrest then defs << "**#{local}"; kw << [:rest, local]
          when :nokey then defs << '**nil'
          when :block then block = local
          end
        end
        block ||= :__tracer_block if passes_block?(original)
        defs << "&#{block}" if block
        [defs.join(', '), ->(callee) { call_source(callee, pos, kw, block) }]
      end

      # Whether the original can use a block given to it: then the wrapper takes and passes one.
      # Taking a block costs the interpreter a third of a wrapped call (measured on Ruby 3.1), and
      # most methods never use theirs; when in doubt (C methods, no bytecode to read), it does.
      def passes_block?(original)
        return true if original.source_location.nil?

        iseq = RubyVM::InstructionSequence.of(original)
        iseq.nil? || iseq.disasm.match?(BLOCK_USE)
      rescue StandardError
        true
      end

      # A C method's parameters have no names (IO#write: [[:rest]]): the -m expressions know them
      # as args (the rest) and arg0, arg1... (by position), unless the method has a parameter
      # of that name (taken: the names it has).
      def local_name(type, name, index, seen, taken)
        if name.nil? && %i[req opt rest].include?(type)
          name = type == :rest ? :args : :"arg#{index}"
          name = nil if taken[name]
        end
        usable = name && name.match?(/\A[a-z_][A-Za-z0-9_]*\z/) && !%i[* ** &].include?(name) && !seen[name]
        seen[name] = true if name
        usable ? name : :"__tracer_p#{index}"
      end

      # Optional arguments are filled left to right: once one is left out, so are those after it
      # (and the rest is empty), so one branch per optional argument covers every call.
      def call_source(callee, pos, kw, block)
        kw_pre, kw_args = keywords(kw)
        opts = pos.select { |type, _| type == :opt }.map(&:last)
        branches = (0..opts.size).map do |given|
          left_out = opts.drop(given)
          args = pos.reject { |type, n| (type == :opt && left_out.include?(n)) || (type == :rest && !left_out.empty?) }
                    .map { |type, n| type == :rest ? "*#{n}" : n.to_s }
          "#{callee}(#{(args + kw_args + (block ? ["&#{block}"] : [])).join(', ')})"
        end
        body = branches.last
        opts.each_with_index.reverse_each do |n, i|
          body = "(::TracerAgent::UNSET.equal?(#{n}) ? #{branches[i]} : #{body})"
        end
        kw_pre + body
      end

      # Keyword arguments passed on as given: an optional one only when the caller gave it.
      def keywords(kw)
        return ['', []] if kw.empty?

        named = kw.reject { |type, _| type == :rest }
        rest = kw.select { |type, _| type == :rest }.map { |_, n| "**#{n}" }
        if named.none? { |type, _| type == :opt }
          return ['', named.map { |_, n| "#{n}: #{n}" } + rest]
        end

        pre = "__tracer_kw = {#{named.select { |t, _| t == :req }.map { |_, n| "#{n}: #{n}" }.join(', ')}}; "
        named.select { |t, _| t == :opt }.each do |_, n|
          pre += "__tracer_kw[:#{n}] = #{n} unless ::TracerAgent::UNSET.equal?(#{n}); "
        end
        [pre, ['**__tracer_kw'] + rest]
      end
    end
  end

  # Prepended to Module the first time a wrapper is put in place: it tells the agent of every
  # method the app defines or aliases while wrappers are (an alias of a wrapper calls the
  # saved original, which must then stay). It does nothing otherwise.
  module DefinitionWatch
    private

    def method_added(name)
      TracerAgent.__defined(self, name) if TracerAgent.__watching
      super
    end

    def singleton_method_added(name)
      TracerAgent.__defined(singleton_class, name) if TracerAgent.__watching
      super
    end
  end
end
