# frozen_string_literal: true

module TracerAgent
  # Tells a left-out optional argument from a given one, in an expression helper's parameter
  # defaults; an -m expression that shows one shows (default).
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

  # Where the agent's wrappers of one class or module live: a module of this class, prepended
  # to it once, the first time one of its methods is traced, and kept (emptied) after, so that
  # every later session puts its wrappers in the same place. Its methods are C functions that
  # report the call and pass it on with super (wrap.c); the class's own method table is never
  # touched.
  class Wrappers < Module
    def initialize(owner)
      super()
      @owner = owner
    end

    def inspect = "#<TracerAgent::Wrappers of #{@owner.inspect}>"
    alias to_s inspect
  end

  # The Ruby half of wrapping (wrap.c is the other): finding the app's methods, and compiling
  # the -m expressions. The agent calls these with the GVL, from its service; they may raise,
  # and it rescues.
  module Wrap
    FILE = '(tracer expressions)'
    # The agent's own Ruby: never wrapped, even when the app's directory holds it.
    OWN = File.expand_path('..', __dir__)
    # Keywords a parameter may be named after, but no local variable can be read by.
    RESERVED = %w[alias and begin BEGIN break case class def defined? do else elsif end END ensure
                  false for if in module next nil not or redo rescue retry return self super then
                  true undef unless until when while yield __FILE__ __LINE__ __ENCODING__].to_h { [_1.to_sym, true] }.freeze
    # Where expression helpers are compiled before wrap.c keeps their UnboundMethod: a module in
    # no class's ancestry, emptied at once.
    HOLDER = Module.new
    # What arity_of says of an attr_reader: no arity a method can have (TRC_WRAP_READER).
    READER = -(1 << 24)

    # Module's and Kernel's own methods, called on the app's modules through bind_call: a call
    # made on each module in turn would leave a call cache behind in each one's class (some
    # 4,000 for a small app, for good), and a module may define these methods otherwise.
    INSTANCE_METHOD = Module.instance_method(:instance_method)
    METHODS = Module.instance_method(:instance_methods)
    PUBLIC_METHODS = Module.instance_method(:public_instance_methods)
    PROTECTED_METHODS = Module.instance_method(:protected_instance_methods)
    PRIVATE_METHODS = Module.instance_method(:private_instance_methods)
    SINGLETON_P = Module.instance_method(:singleton_class?)
    SINGLETON_METHODS = Kernel.instance_method(:singleton_methods)
    SINGLETON_CLASS = Kernel.instance_method(:singleton_class)
    PRIVATE_P = Module.instance_method(:private_method_defined?)
    PROTECTED_P = Module.instance_method(:protected_method_defined?)
    METHOD_P = Module.instance_method(:method_defined?)
    MODULE_NAME = Module.instance_method(:name)
    CONST_DEFINED_P = Module.instance_method(:const_defined?)
    CONST_GET = Module.instance_method(:const_get)
    AUTOLOAD_P = Module.instance_method(:autoload?)
    ANCESTORS = Module.instance_method(:ancestors)

    # A method of each kind, whose entries plan.c finds in the heap and reads before it trusts
    # what it reads of any other entry there (plan.c, entries_usable).
    class Probe
      attr_reader :probe_reader
      attr_writer :probe_writer

      def probe_method = nil
    end
    PROBE_FILE = Probe.instance_method(:probe_method).source_location.first

    # The modules found to have none of the app's methods, by how many methods they had then:
    # looked at again only once that number changes. Without it each session made an object or
    # two for every method of every module (some 100,000 for a Rails app), and Ruby's heap grew
    # to hold them over the first sessions. One map per scope (prefixes, ignores) of the last few
    # sessions; each weak: it keeps no module alive.
    NONE_OF_THE_APPS = {}

    class << self
      # Every module, singleton classes left out (app_methods_of looks at each one's own), less
      # the agent's own and refinements: what app_methods_of is then asked about, a few at a time.
      def modules
        found = []
        ObjectSpace.each_object(Module) do |mod|
          next if SINGLETON_P.bind_call(mod) || Wrappers === mod || HOLDER.equal?(mod) || refinement?(mod)

          found << mod
        end
        found
      end

      # The methods of mod (and of its singleton class) that are the app's: defined by mod itself
      # in a file under one of prefixes, their "Class#method" label matched by no ignore (a
      # Regexp or nil). A file loaded by a relative path (`ruby app.rb`) is taken from cwd, the
      # working directory with its '/' (nil: unknown, such files are left out). Returns
      # [owner, name, visibility (0 public, 1 protected, 2 private), arity, path, line, ...].
      def app_methods_of(mod, prefixes, cwd, ignore)
        found = []
        open = METHODS.bind_call(mod, false)
        closed = PRIVATE_METHODS.bind_call(mod, false)
        singles = SINGLETON_METHODS.bind_call(mod, false)
        count = open.size + closed.size + singles.size
        none = none_of_the_apps(prefixes, cwd, ignore)
        return found if none[mod] == count

        collect(found, mod, open, false, '#', prefixes, cwd, ignore)
        collect(found, mod, closed, true, '#', prefixes, cwd, ignore)
        unless singles.empty?
          single = SINGLETON_CLASS.bind_call(mod)
          collect(found, single, METHODS.bind_call(single, false), false, '.', prefixes, cwd, ignore)
          collect(found, single, PRIVATE_METHODS.bind_call(single, false), true, '.', prefixes, cwd, ignore)
        end
        none[mod] = count if found.empty?
        found
      rescue StandardError
        found # a module that will not list its methods
      end

      # The app's methods among candidates, [owner, name, ...]: the methods whose code plan.c
      # found in the app's files among the heap's method entries, some no longer their owner's,
      # a few named twice. Each is checked once (seen: {owner => {name => true}}, kept across
      # calls) as collect checks it. Returns what app_methods_of returns.
      def app_methods_among(candidates, seen, prefixes, cwd, ignore)
        found = []
        files = self.files
        i = 0
        while i < candidates.size
          owner = candidates[i]
          name = candidates[i + 1]
          i += 2
          names = (seen[owner] ||= {})
          next if names[name]

          names[name] = true
          begin
            own_app_method(owner, name, files, prefixes, cwd) do |method, path, line|
              next if ignore&.match?("#{label_of(owner)}#{SINGLETON_P.bind_call(owner) ? '.' : '#'}#{name}")

              found.push(owner, name, visibility_of(owner, name), arity_of(method, true), path, line)
            end
          rescue StandardError
            next # a method that will not be looked at
          end
        end
        found
      end

      # Whether what owner's instances call first under a name owner defines is owner's own
      # method: no module is prepended to owner but the agent's own Wrappers. plan.c checks a
      # candidate in C only then (checked_in_c); else app_methods_among does, which finds the
      # method as instance_method does, through the prepended modules.
      def plain?(owner)
        ANCESTORS.bind_call(owner).each { |m| return m.equal?(owner) unless Wrappers === m }
        false
      end

      # The visibility of owner's own method name, as visibility_of gives it, or nil when owner
      # no longer defines it itself (removed, undefined). Makes no object (plan.c, checked_in_c).
      def own_visibility(owner, name)
        if METHOD_P.bind_call(owner, name, false) then PROTECTED_P.bind_call(owner, name, false) ? 1 : 0
        elsif PRIVATE_P.bind_call(owner, name, false) then 2
        end
      end

      # The session's verdicts on files, by the String Ruby keeps for each (plan.c reads it).
      def files = (@files ||= {}.compare_by_identity)

      # What app_file makes of a file, kept for the session.
      def file_verdict(file, prefixes, cwd)
        files.fetch(file) { files[file] = app_file(file, prefixes, cwd) }
      end

      # Definitions reach the agent from now on: DefinitionWatch goes in front of Module once.
      def watch
        Module.prepend(DefinitionWatch) unless Module < DefinitionWatch
      end

      # (The same objects all session long: looked up once a session, not once a module.) Also
      # starts the session's map of source files to what app_file made of them.
      def none_of_the_apps(prefixes, cwd, ignore)
        last = @none_for
        return @none if last && last[0].equal?(prefixes) && last[1].equal?(cwd) && last[2].equal?(ignore)

        key = [prefixes, cwd, ignore&.source]
        NONE_OF_THE_APPS.clear if NONE_OF_THE_APPS.size >= 4 && !NONE_OF_THE_APPS.key?(key)
        @none_for = [prefixes, cwd, ignore]
        @files = {}.compare_by_identity
        @none = NONE_OF_THE_APPS[key] ||= ObjectSpace::WeakMap.new
      end

      # The find is over: the map of files goes (some 100 kB in a Rails app, kept for nothing).
      def found_all
        @files = nil
      end

      # Whether owner still defines name itself: what a session found for an earlier one may
      # since have been removed (remove_method and undef_method define nothing).
      def still_defined?(owner, name) = own?(owner, name)

      # The ignores as one Regexp (nil for none): compiled once per session.
      def ignore_regexp(ignores)
        ignores.empty? ? nil : Regexp.union(ignores.map { |r| Regexp.new(r) })
      end

      # One method just defined: [visibility, arity, absolute path, line] if it is the app's (as
      # app_methods_of), else nil.
      def app_method(owner, name, prefixes, cwd, ignore)
        method = INSTANCE_METHOD.bind_call(owner, name)
        return nil unless method.owner.equal?(owner)

        path, line = app_location(method, prefixes, cwd)
        return nil if path.nil? || ignore&.match?("#{label_of(owner)}#{SINGLETON_P.bind_call(owner) ? '.' : '#'}#{name}")

        [visibility_of(owner, name), arity_of(method), path, line]
      rescue StandardError
        nil
      end

      # Every module with a method of this name of its own: [owner, ...], class methods included.
      def owners_of(name)
        found = []
        ObjectSpace.each_object(Module) do |mod|
          next if Wrappers === mod || HOLDER.equal?(mod)

          found << mod if own?(mod, name)
          if !SINGLETON_P.bind_call(mod) && SINGLETON_METHODS.bind_call(mod, false).include?(name)
            found << SINGLETON_CLASS.bind_call(mod)
          end
        rescue StandardError
          next # a module whose methods cannot be listed
        end
        found.uniq
      end

      # [name, visibility, ...] of every method mod defines itself.
      def own_methods(mod)
        list = []
        PUBLIC_METHODS.bind_call(mod, false).each { |n| list.push(n, 0) }
        PROTECTED_METHODS.bind_call(mod, false).each { |n| list.push(n, 1) }
        PRIVATE_METHODS.bind_call(mod, false).each { |n| list.push(n, 2) }
        list
      end

      # inherit: as owner's instances see it, where it comes from (-m names what the app calls).
      def visibility_of(owner, name, inherit = false)
        if PRIVATE_P.bind_call(owner, name, inherit) then 2
        elsif PROTECTED_P.bind_call(owner, name, inherit) then 1
        else 0
        end
      end

      # Methods taken out of their class once defined, which only an UnboundMethod still holds:
      # Sinatra compiles each route ("GET /price/:name") so, and calls it with bind_call. No
      # method table has them, so no wrapper can take their place. Those named name, of owner
      # (nil: any), that no module defines under that name now.
      def detached(owner, name)
        found = []
        ObjectSpace.each_object(UnboundMethod) do |um|
          next unless um.name == name && (owner.nil? || um.owner.equal?(owner))
          next if um.owner.is_a?(Wrappers) || own?(um.owner, name) || um.source_location&.first == FILE

          found << um unless found.any? { |f| f == um }
        rescue StandardError
          next
        end
        found
      end

      # Traces a detached method with a TracePoint on it alone. Ruby 3.1 keeps that method's
      # bytecode instrumented after the TracePoint is disabled (about 2x on a route block that
      # does nothing); Ruby 3.3 and later do not (measured: docs/performance.md).
      def trace_detached(um, token)
        tp = TracePoint.new(:call, :return) do |t|
          t.event == :call ? TracerAgent.__enter(token) : TracerAgent.__leave(token)
        end
        tp.enable(target: um)
        tp
      end

      # The app's methods that only an UnboundMethod holds (Sinatra's routes) are traced with a
      # TracePoint on each, which Ruby 3.3 and later undo completely at detach; Ruby 3.1 leaves
      # such a method's bytecode instrumented (about 2x on the method's own code), so there
      # they are traced only when -m names them. A version test: the only way to find out
      # otherwise is to enable a TracePoint, which costs a YJIT process all its compiled code.
      TRACE_DETACHED = RUBY_VERSION >= '3.3'

      # [um, name, -1, arity, path, line] for each detached method under prefixes.
      def detached_app(prefixes, cwd, ignore)
        found = []
        return found unless TRACE_DETACHED

        ObjectSpace.each_object(UnboundMethod) do |um|
          path, line = app_location(um, prefixes, cwd)
          next if path.nil? || um.owner.is_a?(Wrappers) || own?(um.owner, um.name)
          next if ignore&.match?("#{label_of(um.owner)}##{um.name}")
          next if found.each_slice(6).any? { |f, n| n == um.name && f == um }

          found.push(um, um.name, -1, um.arity, path, line)
        rescue StandardError
          next
        end
        found
      end

      # The -m expressions of owner's method name as a method of their own with the method's
      # parameters, compiled where the method lives (constants in expressions resolve as they
      # would there), returning their values, each rescued: wrap.c calls it with the traced
      # call's own arguments and block (UnboundMethod#bind_call), so that it binds them exactly
      # as the method does and sees them by their names. Returns its UnboundMethod.
      # home: where the expressions are compiled, the module itself for its class methods.
      def expressions(owner, home, name, exprs)
        params = parameter_list(INSTANCE_METHOD.bind_call(owner, name))
        values = exprs.map { |e| expr(e) }.join(",\n")
        target = home.is_a?(Module) ? home : owner
        source = "::TracerAgent::Wrap::HOLDER.module_eval do\n" \
                 "def __tracer_expressions(#{params})\n[#{values}]\nend\nend\n"
        target.class_eval(source, FILE, 0)
        um = HOLDER.instance_method(:__tracer_expressions)
        HOLDER.send(:remove_method, :__tracer_expressions)
        um
      end

      private

      def refinement?(mod)
        defined?(::Refinement) && ::Refinement === mod # (not mod.is_a?: the app's to define)
      end

      # The methods of owner named in names (all private, or none) that are the app's. A file's
      # verdict is worked out once a session (a method's source_location gives the same String
      # for every method of a file), and nothing is made per method but its UnboundMethod and
      # location: a worker's first session looks at some 40,000 methods, and every object made
      # then is a minor GC sooner.
      def collect(found, owner, names, closed, sep, prefixes, cwd, ignore)
        label = nil
        files = (@files ||= {}.compare_by_identity)
        names.each do |name|
          own_app_method(owner, name, files, prefixes, cwd) do |method, path, line|
            next if ignore&.match?("#{label ||= label_of(owner)}#{sep}#{name}")

            found.push(owner, name, closed ? 2 : open_visibility(owner, name), arity_of(method, true), path, line)
          end
        end
      end

      # Yields owner's own method name (an UnboundMethod), its absolute path and line if its
      # file is under prefixes; files keeps each file's verdict for the session. (A yield, not
      # a returned Array: this runs for each of the app's thousands of methods, in the app's
      # heap, during its requests.)
      def own_app_method(owner, name, files, prefixes, cwd)
        method = INSTANCE_METHOD.bind_call(owner, name)
        return unless method.owner.equal?(owner)

        file, line = method.source_location
        path = file && files.fetch(file) { files[file] = app_file(file, prefixes, cwd) }
        yield method, path, line if path
      end

      def open_visibility(owner, name) = PROTECTED_P.bind_call(owner, name, false) ? 1 : 0

      # The method's arity, or READER for an attr_reader under its own name: its wrapper then
      # reads the instance variable itself instead of calling the method (wrap.c). Only
      # attr_reader and attr_writer make a method with a source location and no bytecode, and
      # only attr_reader's takes no argument.
      # located: the caller knows the method has a source location.
      def arity_of(method, located = false)
        arity = method.arity
        return arity unless arity.zero? && method.name == method.original_name && (located || method.source_location)

        RubyVM::InstructionSequence.of(method) ? arity : READER
      end

      # [absolute path, line] of a method defined in a file under prefixes, else nil.
      def app_location(method, prefixes, cwd)
        file, line = method.source_location
        path = file && app_file(file, prefixes, cwd)
        path && [path, line]
      end

      # The file's absolute path if it is under prefixes (and not the agent's), else nil.
      def app_file(file, prefixes, cwd)
        path = absolute(file, cwd)
        return nil if path.nil? || path.start_with?(OWN) || prefixes.none? { |p| path.start_with?(p) }

        File.expand_path(path)
      end

      # The file as the agent's scope sees it (scope.c): relative to cwd unless absolute; nil for
      # what is no file ("<internal:...>", "(eval)").
      def absolute(file, cwd)
        return file if file.start_with?('/')
        return nil if file.start_with?('<', '(') || cwd.nil?

        cwd + file.delete_prefix('./')
      end

      def label_of(owner) = TracerAgent.__label(owner)

      # ---- Ruby::Box (4.0, RUBY_BOX=1) ----
      # A class the app defines in a box of its own (Ruby::Box.new, then box.require) is a
      # constant of that box, not of the box the agent runs in (the main one, or the one that
      # loaded it): -m finds it there and traces it as that box sees it (a wrapper prepended
      # from here is in its ancestry there too). A builtin class reopened in such a box has
      # methods of that box's own, which a wrapper put in place from here would not reach: -m
      # says so rather than waiting for the method to appear.

      # The app's boxes other than the agent's, and than the root one (whose classes every box
      # has); none when Ruby::Box is off or unknown.
      def other_boxes
        return [] unless defined?(Ruby::Box) && Ruby::Box.enabled?

        here = Ruby::Box.current
        root = Ruby::Box.root
        found = []
        ObjectSpace.each_object(Ruby::Box) { |box| found << box unless box.equal?(here) || box.equal?(root) }
        found
      end

      # The module named path ("Billing::Invoice") in one box other than the agent's, as [mod,
      # "#<Ruby::Box:3,user,optional>"]: nil when no box, or more than one, has it. Sets off no
      # autoload, calls no method of the app's.
      def boxed(path)
        found = other_boxes.filter_map do |box|
          mod = path.split('::').inject(box) do |m, name|
            break nil unless Module === m && CONST_DEFINED_P.bind_call(m, name, false) && !AUTOLOAD_P.bind_call(m, name, false)

            CONST_GET.bind_call(m, name, false)
          end
          [mod, box.inspect] if Module === mod
        rescue StandardError
          nil
        end
        found.uniq! { |mod, _| mod.__id__ }
        found.size == 1 ? found.first : nil
      end

      # Why mod has no method name here when a box of the app's gives its builtin class one
      # (singleton: a class method): a String, or nil when no other box has it either.
      def box_only(mod, name, singleton)
        mod_name = MODULE_NAME.bind_call(mod) or return nil
        receiver = singleton ? "::#{mod_name}.singleton_class" : "::#{mod_name}"
        check = "m = #{receiver}; m.method_defined?(#{name.inspect}) || m.private_method_defined?(#{name.inspect})"
        boxes = other_boxes.select { |box| box.eval(check) == true rescue false } # rubocop:disable Style/RescueModifier
        return nil if boxes.empty?

        "#{mod_name}#{singleton ? '.' : '#'}#{name} is defined in #{boxes.map(&:inspect).join(', ')} only: " \
          "a builtin class reopened in a Ruby::Box has methods of that box's own, which tracer, in " \
          "#{Ruby::Box.current.inspect}, cannot wrap"
      end

      def own?(mod, name)
        METHOD_P.bind_call(mod, name, false) || PRIVATE_P.bind_call(mod, name, false)
      end

      # The original's parameter list, with optional arguments defaulting to UNSET (shown as
      # (default)), and names a C method has not got made up: arg0, arg1... by position, args
      # for the rest.
      def parameter_list(method)
        params = method.parameters
        return '*, **, &' if params == [%i[rest *], %i[keyrest **], %i[block &]]

        seen = {}
        taken = params.filter_map { |_, name| [name, true] if name }.to_h
        params.each_with_index.map do |(type, name), i|
          local = local_name(type, name, i, seen, taken)
          case type
          when :req then local.to_s
          when :opt then "#{local} = ::TracerAgent::UNSET"
          when :rest then "*#{local}"
          when :keyreq then RESERVED[name] ? '**' : "#{name}:"
          when :key then RESERVED[name] ? '**' : "#{name}: ::TracerAgent::UNSET"
          when :keyrest then "**#{local}"
          when :nokey then '**nil'
          when :block then "&#{local}"
          end
        end.uniq.join(', ')
      end

      def local_name(type, name, index, seen, taken)
        if name.nil? && %i[req opt rest].include?(type)
          name = type == :rest ? :args : :"arg#{index}"
          name = nil if taken[name]
        end
        usable = name && name.match?(/\A[a-z_][A-Za-z0-9_]*\z/) && !%i[* ** &].include?(name) && !seen[name] && !RESERVED[name]
        seen[name] = true if name
        usable ? name : :"__tracer_p#{index}"
      end

      # An expression as Ruby code: its value, or what it raised.
      def expr(code)
        body = code == '__source__' ? "(__l = ::Kernel.caller_locations(1, 1)[0]) && \"\#{__l.path}:\#{__l.lineno}\"" : code
        RubyVM::InstructionSequence.compile("->{ #{body}\n}") # a syntax error shows as the value
        "begin\n#{body}\nrescue ::Exception => __e\n::TracerAgent::ExprFailure.new(__e)\nend"
      rescue SyntaxError => e
        "::TracerAgent::ExprFailure.new(::SyntaxError.new(#{e.message.lines.first.to_s.strip.inspect}))"
      end
    end
  end

  # Prepended to Module the first time a session wraps methods: it tells the agent of every
  # method the app defines while a session wants to know (a class loaded after attach, a method
  # defined again), and of every method it removes or undefines. It does nothing otherwise.
  module DefinitionWatch
    private

    # (__changed: a reader's wrapper reads the variable itself until its method changes, wrap.c.)
    def method_added(name)
      TracerAgent.__changed(self, name)
      TracerAgent.__defined(self, name) if TracerAgent.__watching
      super
    end

    def singleton_method_added(name)
      TracerAgent.__changed(singleton_class, name)
      TracerAgent.__defined(singleton_class, name) if TracerAgent.__watching
      super
    end

    def method_removed(name)
      TracerAgent.__changed(self, name)
      super
    end

    def method_undefined(name)
      TracerAgent.__changed(self, name)
      super
    end

    def singleton_method_removed(name)
      TracerAgent.__changed(singleton_class, name)
      super
    end

    def singleton_method_undefined(name)
      TracerAgent.__changed(singleton_class, name)
      super
    end
  end
end