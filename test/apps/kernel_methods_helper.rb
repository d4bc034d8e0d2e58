# kernel_methods_helper.rb: what kernel_methods.rb loads with require_relative, every round.
KERNEL_METHODS_HELPER = true unless defined?(KERNEL_METHODS_HELPER)
